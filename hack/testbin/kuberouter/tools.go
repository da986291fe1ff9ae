//go:build tools

// Package kuberouter pins kube-router, whose network policy controller
// enforces NetworkPolicies on the local cluster's real nodes.
package kuberouter

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
