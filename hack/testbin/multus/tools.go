//go:build tools

// Package multus pins Multus's thin CNI plugin, the local cluster's real
// nodes' CNI.
package multus

import _ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
