// Package mpi is Torus's single source of MPI knowledge: the names of the
// objects a TrainJob owns, host names and hostfile formats, the environment
// each MPI implementation needs, SSH material, rank-to-pod placement and the
// JobSet built for a TrainJob. The operator and the kubectl-mpi plugin both
// import it; nothing here talks to the API server.
package mpi
