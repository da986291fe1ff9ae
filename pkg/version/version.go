// Package version reports the build's version, set at link time:
//
//	-ldflags "-X github.com/torus-mpi/torus/pkg/version.Version=v0.1.0"
package version

// Version is the release of this build; "dev" when built without ldflags.
var Version = "dev"
