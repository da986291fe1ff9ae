package framework

import "time"

// Shared Eventually/Consistently timings.
const (
	Timeout     = 20 * time.Second
	Interval    = 100 * time.Millisecond
	ShortWindow = 2 * time.Second
)
