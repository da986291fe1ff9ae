//go:build tools

// Package containerd pins containerd, the real nodes' container runtime:
// a release that mounts image volumes (Kubernetes's ImageVolume, on by
// default since 1.35), which Debian's does not.
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
