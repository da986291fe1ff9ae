// Package migrate is kubectl mpi migrate, which turns legacy Kubeflow
// MPIJobs (kubeflow.org/v2beta1, as mpi-operator v0.8.2 runs them) into
// Trainer v2 TrainJobs that Torus runs, plus a namespaced TrainingRuntime
// holding the job's launcher and worker templates when no shipped
// ClusterTrainingRuntime expresses them.
//
// Every difference between what mpi-operator would have done and what Torus
// will do is reported as a Finding: a note for information, a change for a
// value rewritten to keep its intent, a warning for a field without an exact
// equivalent, an error for a document that cannot be converted. Nothing is
// dropped without a finding.
//
// The conversion reads and writes manifests only. Around it, files.go reads
// files and directories (the -f of migrate and run) and writes output
// directories, and cluster.go reads MPIJobs from a cluster and creates
// their conversions; cmd.go wires them to the command's flags.
package migrate
