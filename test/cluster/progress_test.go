package cluster

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// reportScript posts a report of 7 % from inside a job's pod, as a program
// does with the variables its pod is given: to the job's own status, or,
// with an argument NAMESPACE/NAME, to that job's. It prints the answer's
// code and body.
const reportScript = `
import json, os, ssl, sys, urllib.error, urllib.request
url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
if len(sys.argv) > 1:
    ns, name = sys.argv[1].split("/")
    url = url[:url.index("/namespaces/")] + "/namespaces/%s/trainjobs/%s/status" % (ns, name)
token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
req = urllib.request.Request(url, data=json.dumps({"trainerStatus": {"progressPercentage": 7}}).encode(), method="POST",
                             headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`

// realNodeProgress reports progress from the pods of real jobs: a job's own
// pod is heard, a pod of another job or of another namespace is refused.
// The reference training's reports are the quick start's (training_test.go).
func realNodeProgress(dirp *string) {
	It("takes a progress report from a job's own pod, and refuses one a pod of another job or namespace sends for it", func() {
		dir := *dirp
		const other = "progress-other"
		out, code := kubectl(dir, "create", "namespace", other)
		Expect(code).To(Equal(0), out)
		DeferCleanup(func() { kubectl(dir, "delete", "namespace", other, "--wait=false") })
		jobs := []struct{ ns, name string }{{"default", "reported"}, {"default", "forger"}, {other, "forger"}}
		for _, j := range jobs {
			DeferCleanup(func() { kubectlMPI(dir, "delete", j.name, "-n", j.ns) })
			out, code := kubectlMPI(dir, "run", j.name, "-n", j.ns, "--runtime", "torus-openmpi-local", "--workers", "1", "--slots-per-worker", "1",
				"--", "mpirun", "-n", "1", "sleep", "600")
			Expect(code).To(Equal(0), out)
		}
		for _, j := range jobs {
			out, code := kubectlMPI(dir, "wait", j.name, "-n", j.ns, "--for=condition=Running", "--timeout", "4m")
			Expect(code).To(Equal(0), "%s/%s did not run:\n%s\n%s", j.ns, j.name, out, jobReportIn(dir, j.ns, j.name, nil))
		}
		// send runs reportScript in the worker of job ns/name.
		send := func(ns, name string, to ...string) string {
			GinkgoHelper()
			pod, _ := kubectl(dir, "get", "pods", "-n", ns, "-o", "name", "-l", "jobset.sigs.k8s.io/jobset-name="+name+",jobset.sigs.k8s.io/replicatedjob-name=node")
			Expect(strings.TrimSpace(pod)).NotTo(BeEmpty())
			out, _ := kubectl(dir, append([]string{"exec", "-n", ns, strings.TrimSpace(pod), "-c", "node", "--", "python3", "-c", reportScript}, to...)...)
			return out
		}

		By("the job's own worker reports: the status has its progress")
		Expect(send("default", "reported")).To(HavePrefix("200 "))
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "trainjob", "reported", "-o", "jsonpath={.status.trainerStatus.progressPercentage}")
			return out
		}, time.Minute, time.Second).Should(Equal("7"))
		list, _ := kubectlMPI(dir, "list")
		Expect(list).To(MatchRegexp(`(?m)^reported\s+Running\s+1/1\s+1\s+0\s+7%\s`), list)

		By("a worker of another job, with its own token, reporting for this one")
		out = send("default", "forger", "default/reported")
		Expect(out).To(HavePrefix("403 "), out)
		Expect(out).To(ContainSubstring(`not valid for TrainJob default/reported`))

		By("a worker of a job in another namespace, reporting for this one")
		out = send(other, "forger", "default/reported")
		Expect(out).To(HavePrefix("403 "), out)

		By("neither forged report reached the status")
		out, _ = kubectl(dir, "get", "trainjob", "reported", "-o", "jsonpath={.status.trainerStatus.progressPercentage}")
		Expect(out).To(Equal("7"))
		describe, _ := kubectlMPI(dir, "describe", "reported")
		Expect(describe).To(MatchRegexp(`Progress:\s+7% \(reported \S+ ago\)`), describe)
	})
}
