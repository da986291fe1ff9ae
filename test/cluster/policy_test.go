package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// tenants are two namespaces whose policies admit no traffic into their
// pods: one asks Torus for a NetworkPolicy of each job's own, the other
// does not. outsider and neighbour are pods outside any job, in another
// namespace and in the job's own.
const tenants = `
apiVersion: v1
kind: Namespace
metadata:
  name: tenant-on
  annotations: {torus-mpi.io/network-policy: restricted}
---
apiVersion: v1
kind: Namespace
metadata: {name: tenant-off}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: tenant-on}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: tenant-off}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: v1
kind: Pod
metadata: {name: outsider, namespace: default}
spec:
  nodeSelector: {torus-mpi.io/real-node: "true"}
  containers:
  - {name: main, image: registry.torus.local/tiny:1, imagePullPolicy: Never, args: [pause]}
---
apiVersion: v1
kind: Pod
metadata: {name: neighbour, namespace: tenant-on}
spec:
  nodeSelector: {torus-mpi.io/real-node: "true"}
  containers:
  - {name: main, image: registry.torus.local/tiny:1, imagePullPolicy: Never, args: [pause]}
`

// realNodePolicies are the specs of NetworkPolicies on the real nodes,
// where kube-router's policy controller enforces them: what Torus's
// per-job policy lets through, what it keeps out, and what a job whose
// namespace denies everything without it is told.
func realNodePolicies(dirp *string) {
	Context("NetworkPolicies enforced on the real nodes", Ordered, func() {
		var dir string
		jobs := map[string]*background{}
		logs := map[string]*background{}

		BeforeAll(func() {
			dir = *dirp
			manifest := filepath.Join(dir, "tenants.yaml")
			Expect(os.WriteFile(manifest, []byte(tenants), 0o644)).To(Succeed())
			out, code := kubectl(dir, "apply", "-f", manifest)
			Expect(code).To(Equal(0), out)
			DeferCleanup(func() { kubectl(dir, "delete", "-f", manifest, "--wait=false") })
			run := func(ns, name string, wait bool, command ...string) *background {
				// The image's sshd, whose banner and refusals the specs read.
				args := []string{"run", name, "-n", ns, "--launch", "openssh", "--runtime", "torus-openmpi-local", "--workers", "2", "--slots-per-worker", "2"}
				if wait {
					args = append(args, "--wait", "--timeout", "3m")
				}
				return kubectlMPIInBackground(dir, append(append(args, "--"), command...)...)
			}
			jobs["on"] = run("tenant-on", "pi", true, piCommand["torus-openmpi-local"]...)
			// Every rank's output, for the report of a failure: the
			// workers' pods go with the job.
			logs["on"] = kubectlMPIInBackground(dir, "logs", "pi", "-n", "tenant-on", "-f")
			jobs["off"] = run("tenant-off", "pi", true, piCommand["torus-openmpi-local"]...)
			// Its launcher holds the job open, workers serving, until deleted.
			out, code = run("tenant-on", "held", false, "sleep", "600").wait()
			Expect(code).To(Equal(0), out)
			DeferCleanup(func() { kubectlMPI(dir, "delete", "held", "-n", "tenant-on") })
		})

		It("runs a job in a namespace that admits nothing, through the job's own policy: its ranks reach each other across the nodes", func() {
			out, code := jobs["on"].wait()
			if code != 0 {
				Fail(fmt.Sprintf("the job did not complete (exit %d):\n%s\n%s", code, out, jobReportIn(dir, "tenant-on", "pi", logs["on"])))
			}
			out, code = kubectlMPI(dir, "logs", "pi", "-n", "tenant-on", "--launcher")
			Expect(code).To(Equal(0), out)
			Expect(out).To(MatchRegexp(piResult))
			Expect(scheduledNodes(dir, "tenant-on", "pi-node-0-")).To(ConsistOf("real-node-0", "real-node-1"), "the workers did not span both nodes")
			out, _ = kubectl(dir, "get", "networkpolicy", "-n", "tenant-on", "-o", "name")
			Expect(strings.Fields(out)).To(ContainElement("networkpolicy.networking.k8s.io/pi-mpi"))
		})

		It("keeps a worker's sshd from pods outside the job, in its namespace or another, and open to the job's launcher", func() {
			worker := "jobset.sigs.k8s.io/jobset-name=held,jobset.sigs.k8s.io/replicatedjob-name=node"
			_, code := kubectl(dir, "wait", "pods", "-n", "tenant-on", "-l", worker, "--for=condition=Ready", "--timeout=120s")
			Expect(code).To(Equal(0))
			ip, _ := kubectl(dir, "get", "pods", "-n", "tenant-on", "-l", worker, "-o", "jsonpath={.items[0].status.podIP}")
			Expect(ip).To(MatchRegexp(`^10\.234\.`))
			sshd := ip + ":2222"
			// A pod Ready is not yet a pod kube-router has rules for: it
			// programs a pod's chains and the policies' address sets on a
			// sync after the pod has its address, later on a busy node, and
			// until then a connection gets through, or is refused, whatever
			// the policies say. Each connection is tried until those rules
			// answer it.
			for _, from := range []struct{ ns, pod string }{{"default", "outsider"}, {"tenant-on", "neighbour"}} {
				_, code := kubectl(dir, "wait", "pod", from.pod, "-n", from.ns, "--for=condition=Ready", "--timeout=60s")
				Expect(code).To(Equal(0))
				Eventually(func(g Gomega) {
					out, code := kubectl(dir, "exec", "-n", from.ns, from.pod, "--", "/usr/bin/tiny", "connect", sshd)
					g.Expect(code).NotTo(Equal(0), "%s/%s reached the worker's sshd: %s", from.ns, from.pod, out)
					g.Expect(out).To(ContainSubstring("connection refused"), "kube-router rejects what no policy admits")
				}, time.Minute, 2*time.Second).Should(Succeed())
			}
			launcher := "jobset.sigs.k8s.io/jobset-name=held,jobset.sigs.k8s.io/replicatedjob-name=launcher"
			_, code = kubectl(dir, "wait", "pods", "-n", "tenant-on", "-l", launcher, "--for=condition=Ready", "--timeout=120s")
			Expect(code).To(Equal(0))
			pod, _ := kubectl(dir, "get", "pods", "-n", "tenant-on", "-l", launcher, "-o", "name")
			Eventually(func(g Gomega) {
				out, code := kubectl(dir, "exec", "-n", "tenant-on", strings.TrimSpace(pod), "-c", "node", "--", "python3", "-c",
					fmt.Sprintf("import socket; print(socket.create_connection((%q, 2222), 3).recv(64).decode())", ip))
				g.Expect(code).To(Equal(0), out)
				g.Expect(out).To(HavePrefix("SSH-2.0-OpenSSH"))
			}, time.Minute, 2*time.Second).Should(Succeed(), "the job's own policy admits its launcher")
		})

		It("fails a job whose namespace admits nothing and that has no policy of its own, saying a NetworkPolicy refused the launcher", func() {
			out, code := jobs["off"].wait()
			Expect(code).To(Equal(3), "run --wait exits 3 when the job fails:\n%s", out)
			Expect(out).To(ContainSubstring("a NetworkPolicy rejects the launcher's connection"))
			describe, _ := kubectlMPI(dir, "describe", "pi", "-n", "tenant-off")
			Expect(describe).To(ContainSubstring("annotate the namespace or the runtime torus-mpi.io/network-policy=restricted"))
		})
	})
}

// scheduledNodes are the nodes the scheduler placed a namespace's pods on
// whose names start with prefix, read from its events: they outlive the
// pods.
func scheduledNodes(dir, ns, prefix string) []string {
	GinkgoHelper()
	out, code := kubectl(dir, "get", "events", "-n", ns, "--field-selector", "reason=Scheduled",
		"-o", `jsonpath={range .items[*]}{.message}{"\n"}{end}`)
	Expect(code).To(Equal(0), out)
	seen := map[string]bool{}
	var nodes []string
	for _, l := range strings.Split(out, "\n") {
		// "Successfully assigned ns/pod to node".
		f := strings.Fields(l)
		if len(f) == 5 && strings.HasPrefix(f[2], ns+"/"+prefix) && !seen[f[4]] {
			seen[f[4]] = true
			nodes = append(nodes, f[4])
		}
	}
	Expect(nodes).NotTo(BeEmpty(), "no Scheduled events of %s/%s*:\n%s", ns, prefix, out)
	return nodes
}
