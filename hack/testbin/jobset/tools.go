//go:build tools

// Package jobset pins the JobSet controller the local cluster runs.
package jobset

import _ "sigs.k8s.io/jobset"
