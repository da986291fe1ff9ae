package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// exchange has each rank send 8 MiB to the rank two places on, which sits on
// the other worker (2 ranks per worker), and report how many bytes its
// pod's net1 and eth0 sent meanwhile, from the kernel's own counters. The
// counters are read after a barrier: sendrecv returns once the data is in the
// socket's buffer, and only when every peer has received its share has every
// byte left the pod.
const exchange = `from mpi4py import MPI
c = MPI.COMM_WORLD
r, n = c.Get_rank(), c.Get_size()
def sent(i): return int(open('/sys/class/net/%s/statistics/tx_bytes' % i).read())
before = {i: sent(i) for i in ('net1', 'eth0')}
c.sendrecv(bytes(8 << 20), dest=(r + 2) % n, source=(r + 2) % n)
c.Barrier()
print('rank %d sent %d bytes on net1 and %d on eth0' % (r, sent('net1') - before['net1'], sent('eth0') - before['eth0']), flush=True)
`

// brokenNetworks are two profiles that cannot attach: one names a
// NetworkAttachmentDefinition that does not exist, the other one whose
// macvlan has no master interface on the nodes.
const brokenNetworks = `
apiVersion: torus-mpi.io/v1alpha1
kind: MPINetworkProfile
metadata: {name: nonad}
spec:
  networks: [{name: not-there, namespace: default}]
---
apiVersion: torus-mpi.io/v1alpha1
kind: MPINetworkProfile
metadata: {name: noattach}
spec:
  networks: [{name: no-master, namespace: default, interface: net1}]
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: no-master
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/resourceName: rdma/hca_shared_devices_a}
spec:
  config: '{"cniVersion": "1.0.0", "name": "no-master", "type": "macvlan", "master": "eth9", "ipam": {"type": "static"}}'
`

// realNodeNetworks are the specs of a job's secondary network on the real
// nodes: Multus attaches the cluster's macvlan NetworkAttachmentDefinition
// as net1, the profile pins MPI's traffic there, and Torus's network check
// reads what Multus wrote.
func realNodeNetworks(dirp *string) {
	Context("a secondary network attached by Multus on the real nodes", Ordered, func() {
		var dir string
		jobs := map[string]*background{}

		BeforeAll(func() {
			dir = *dirp
			jobs["fabric"] = kubectlMPIInBackground(dir, "run", "fabric", "--runtime", "torus-openmpi-local", "--network", "local-macvlan",
				"--workers", "2", "--slots-per-worker", "2", "--wait", "--timeout", "3m", "--", "mpirun", "-n", "4", "python3", "-c", exchange)
			manifest := filepath.Join(dir, "broken-networks.yaml")
			Expect(os.WriteFile(manifest, []byte(brokenNetworks), 0o644)).To(Succeed())
			out, code := kubectl(dir, "apply", "-f", manifest)
			Expect(code).To(Equal(0), out)
			DeferCleanup(func() { kubectl(dir, "delete", "-f", manifest, "--wait=false") })
			for _, j := range []string{"nonad", "noattach"} {
				out, code := kubectlMPI(dir, "run", j, "--runtime", "torus-openmpi-local", "--network", j, "--workers", "1", "--", "true")
				Expect(code).To(Equal(0), out)
				DeferCleanup(func() { kubectlMPI(dir, "delete", j) })
			}
		})

		It("runs a job whose ranks exchange their data over net1, the macvlan attachment, across the nodes", func() {
			out, code := jobs["fabric"].wait()
			if code != 0 {
				Fail(fmt.Sprintf("the job did not complete (exit %d):\n%s\n%s", code, out, jobReport(dir, "fabric", nil)))
			}
			Expect(scheduledNodes(dir, "default", "fabric-node-0-")).To(ConsistOf("real-node-0", "real-node-1"))
			out, code = kubectlMPI(dir, "logs", "fabric", "--launcher")
			Expect(code).To(Equal(0), out)
			sent := regexp.MustCompile(`rank (\d) sent (\d+) bytes on net1 and (\d+) on eth0`).FindAllStringSubmatch(out, -1)
			Expect(sent).To(HaveLen(4), out)
			for _, m := range sent {
				net1, _ := strconv.Atoi(m[2])
				eth0, _ := strconv.Atoi(m[3])
				Expect(net1).To(BeNumerically(">=", 8<<20), "rank %s's 8 MiB did not leave on net1: %s", m[1], m[0])
				Expect(eth0).To(BeNumerically("<", 1<<20), "rank %s's data left on eth0: %s", m[1], m[0])
			}
			By("Torus read Multus's network-status and found net1 on every worker")
			describe, _ := kubectlMPI(dir, "describe", "fabric")
			Expect(describe).To(ContainSubstring("local-macvlan"))
			out, _ = kubectl(dir, "get", "trainjob", "fabric", "-o", `jsonpath={.status.conditions[?(@.type=="NetworksReady")].status}`)
			Expect(out).To(Equal("True"), describe)
		})

		It("holds a job whose profile names a NetworkAttachmentDefinition that does not exist, before any pod is made, and says which", func() {
			Eventually(func() string { return conditionMessages(dir, "nonad") }, time.Minute).
				Should(ContainSubstring("NetworkAttachmentDefinition default/not-there of MPINetworkProfile nonad does not exist"))
			out, _ := kubectl(dir, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=nonad", "-o", "name")
			Expect(strings.TrimSpace(out)).To(BeEmpty())
		})

		It("explains a pod whose attachment fails in Multus's and the plugin's own words", func() {
			// One reading of the condition, cause and fix together: the
			// operator rewrites it as the kubelet retries the sandbox.
			Eventually(func() string { return running(dir, "noattach").Message }, time.Minute).
				Should(And(ContainSubstring("FailedCreatePodSandBox"), ContainSubstring(`plugin type="multus"`),
					ContainSubstring(`error adding container to network "no-master"`),
					ContainSubstring("check the NetworkAttachmentDefinitions it names")))
		})
	})
}
