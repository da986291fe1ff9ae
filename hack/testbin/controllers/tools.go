//go:build tools

// Package controllers pins the controllers the local cluster and the tests
// run beside Kubernetes's own: JobSet, Kueue, kwok (which simulates nodes
// and pods) and upstream Kubeflow Trainer (which test/perf/controlplane and the drop-in
// suite measure Torus against). One module, so that the Kubernetes
// libraries they share are resolved to one version and compiled once.
// Only these pins are committed; the code comes from the Go module proxy.
package controllers

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
	_ "sigs.k8s.io/jobset"
	_ "sigs.k8s.io/kueue/cmd/kueue"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
