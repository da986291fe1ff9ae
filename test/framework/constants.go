package framework

import "time"

// Shared Eventually/Consistently timings.
const (
	Timeout     = 20 * time.Second
	Interval    = 100 * time.Millisecond
	ShortWindow = 2 * time.Second
)

// KwokRunDuration is the pod annotation the local cluster's kwok stage
// (test/localcluster/kwok/launcher-complete.yaml) reads as how long a launcher
// runs before it completes; kwok plays the stage again when the pod changes.
const KwokRunDuration = "torus-mpi.io/kwok-run-duration"
