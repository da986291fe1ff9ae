// Package mpi is Torus's single source of MPI knowledge: the names of the
// objects a TrainJob owns, host names and hostfile formats, the environment
// each MPI implementation needs, SSH material and the pods' SSH set-up,
// rank-to-pod placement, network plans, and a TrainJob resolved against its
// runtime into a Job. The operator and the kubectl-mpi plugin both import
// it; nothing here talks to the API server. The objects built from a Job
// are the operator's (operator/children).
package mpi
