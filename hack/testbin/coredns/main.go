// Command coredns is CoreDNS with only the plugins the local cluster's
// Corefile uses (test/localcluster): bind, ready, errors and kubernetes. CoreDNS
// builds this way by design (its plugin.cfg); the full build also links the
// cloud providers' SDKs, which took most of its four minutes' cold build.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// In plugin.cfg's order, which is the order a query passes them.
	dnsserver.Directives = []string{"bind", "ready", "errors", "kubernetes"}
}

func main() {
	coremain.Run()
}
