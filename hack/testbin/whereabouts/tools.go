//go:build tools

// Package whereabouts pins Whereabouts, the cluster-wide IPAM of the real
// nodes' secondary network.
package whereabouts

import _ "github.com/k8snetworkplumbingwg/whereabouts/cmd"
