//go:build tools

// Package kueue pins the Kueue controller the local cluster runs.
package kueue

import _ "sigs.k8s.io/kueue/cmd/kueue"
