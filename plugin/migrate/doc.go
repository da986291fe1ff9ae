// Package migrate turns legacy Kubeflow MPIJobs (kubeflow.org/v2beta1, as
// mpi-operator v0.8.2 runs them) into Trainer v2 TrainJobs that Torus runs,
// plus a namespaced TrainingRuntime holding the job's launcher and worker
// templates when no shipped ClusterTrainingRuntime expresses them.
//
// Every difference between what mpi-operator would have done and what Torus
// will do is reported as a Finding: a note for information, a change for a
// value rewritten to keep its intent, a warning for a field without an exact
// equivalent, an error for a document that cannot be converted. Nothing is
// dropped without a finding.
//
// The package reads and writes manifests only; it does not talk to the API
// server. kubectl-mpi's migrate command wires it to files and clusters.
package migrate
