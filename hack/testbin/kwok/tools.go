//go:build tools

// Package kwok pins kwok, which simulates the local cluster's nodes and pods.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
