package olm

import (
	. "github.com/onsi/ginkgo/v2"
)

// One ordered container: the least-privilege run needs the cluster's
// admission webhooks pointing at its operator, and OLM later registers
// webhooks for a Deployment whose pod only kwok pretends to run.
var _ = Describe("Install paths", Ordered, func() {
	Context("least privilege: the operator with only the CSV's permissions", Ordered, leastPrivilege)
	// Before OLM: the overlay's uninstall deletes the namespace OLM then
	// installs into.
	Context("kustomize: the kubernetes overlay, its operator a pod on the real node", Ordered, kustomizeOverlay)
	Context("OperatorHub: OLM installs the bundle from a catalog", Ordered, operatorHub)
})
