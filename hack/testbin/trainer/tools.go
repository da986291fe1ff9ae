//go:build tools

// Package trainer pins the upstream Kubeflow Trainer controller that
// hack/bench measures Torus against. Only this pin is committed; the
// upstream code comes from the Go module proxy at build time.
package trainer

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
