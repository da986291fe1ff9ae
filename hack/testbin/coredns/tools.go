//go:build tools

// Package coredns pins CoreDNS, the local cluster's DNS for the real node.
package coredns

import (
	_ "github.com/coredns/coredns"
)
