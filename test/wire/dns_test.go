package wire_test

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// hostsFile is the hosts file of pod p: every name under which p could
// resolve a pod of the job in a real cluster, and nothing more. Cluster DNS
// answers for <host>.<subdomain>.<namespace>.svc.<cluster domain> (the
// headless service JobSet makes, publishing not-ready pods too); the pod's
// resolver completes shorter names with its search list, which is the
// namespace's defaults plus whatever the pod's dnsConfig adds. So a name
// reaches a pod here only if the search list would complete it, and a short
// host name resolves only where the operator added the job's subdomain as a
// search entry (Hydra needs it for the launcher's name) or for the pod
// itself, which the kubelet's hosts file names.
func (c *cluster) hostsFile(p *pod) string {
	ns := c.gen.jobSet.Namespace
	sub := c.gen.jobSet.Spec.Network.Subdomain
	domain := mpi.DefaultClusterDomain
	var searches []string
	if p.spec.DNSPolicy != corev1.DNSNone {
		searches = []string{ns + ".svc." + domain, "svc." + domain, domain}
	}
	if p.spec.DNSConfig != nil {
		searches = append(searches, p.spec.DNSConfig.Searches...)
	}

	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, q := range c.pods() {
		fqdn := fmt.Sprintf("%s.%s.%s.svc.%s", q.hostname, sub, ns, domain)
		names := []string{fqdn}
		for _, d := range searches {
			if short, ok := strings.CutSuffix(fqdn, "."+d); ok && !contains(names, short) {
				names = append(names, short)
			}
		}
		if q == p && !contains(names, q.hostname) {
			names = append(names, q.hostname)
		}
		fmt.Fprintf(&b, "%s\t%s\n", q.address, strings.Join(names, " "))
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
