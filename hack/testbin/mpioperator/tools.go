//go:build tools

// Package mpioperator pins Kubeflow's mpi-operator, which the benchmarks
// run beside Torus's operator on the local cluster (make bench-mpi-operator):
// what users would pick instead. A module of its own: its Kubernetes
// libraries are resolved apart from the other controllers'. Only these pins
// are committed; the code comes from the Go module proxy.
package mpioperator

import (
	_ "github.com/kubeflow/mpi-operator/cmd/mpi-operator"
)
