//go:build tools

// Package olm pins the Operator Lifecycle Manager (olm-operator and
// catalog-operator) and opm, which the OLM end-to-end suite (test/olm) runs
// against the local cluster. opm comes from the operator-registry version
// OLM itself is built against, so the catalog it validates is the catalog
// OLM reads.
package olm

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
