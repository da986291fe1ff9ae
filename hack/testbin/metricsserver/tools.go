//go:build tools

// Package metricsserver pins metrics-server, which serves the metrics API
// (kubectl top, kubectl mpi top) from the kubelets' resource metrics on
// the local cluster when it is started with -metrics-server. A module of
// its own: its Kubernetes libraries are resolved apart from the other
// controllers'. Only these pins are committed; the code comes from the Go
// module proxy.
package metricsserver

import (
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
