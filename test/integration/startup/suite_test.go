// Package startup_test starts the operator as its command does
// (operator/app) on a cluster that lacks an API it needs.
package startup_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestStartup(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Operator start-up with missing dependencies")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(), "run `make test-integration`, which builds etcd and kube-apiserver into .testbin/bin")
})
