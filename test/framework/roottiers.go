package framework

import (
	"os"

	"github.com/onsi/ginkgo/v2"
)

// EnvRequireRootTiers, set to "1", makes a tier that needs root (the wire
// test, the real node's specs, OLM's real pods) fail where it would skip.
// .ci/run sets it: a green CI run then proves those tiers ran.
const EnvRequireRootTiers = "TORUS_REQUIRE_ROOT_TIERS"

// RootTiersRequired reports whether EnvRequireRootTiers is set.
func RootTiersRequired() bool { return os.Getenv(EnvRequireRootTiers) == "1" }

// SkipRootTier skips a spec that cannot run here for reason, or fails it
// where the root tiers are required.
func SkipRootTier(reason string) {
	ginkgo.GinkgoHelper()
	if RootTiersRequired() {
		ginkgo.Fail(reason + " (" + EnvRequireRootTiers + "=1: this tier must run)")
	}
	ginkgo.Skip(reason)
}
