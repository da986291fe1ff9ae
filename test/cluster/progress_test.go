package cluster

import (
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
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
// pod is heard, a pod of another job or of another namespace is refused, a
// job on upstream's framework is heard as an MPI job is.
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
		// The ready count is the JobSet's, which its controller writes some
		// time after the pod turns ready; the progress is already there.
		Eventually(func() string {
			list, _ := kubectlMPI(dir, "list")
			return list
		}, time.Minute, time.Second).Should(MatchRegexp(`(?m)^reported\s+Running\s+1/1\s+1\s+0\s+7%\s`))

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

	It("takes the report of a job on upstream's framework, from a program written for upstream's endpoint", func() {
		dir := *dirp
		const name = "plain-reports"
		// A runtime without an ML policy (upstream's plainml): one pod of
		// the reference image runs the program, no MPI.
		image := localRuntime(dir, "torus-openmpi-local").Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image
		apply(dir, &trainer.TrainingRuntime{
			TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
				ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
					Name: "node", Replicas: 1,
					Template: batchv1.JobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
						Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
							RestartPolicy: corev1.RestartPolicyNever,
							Containers:    []corev1.Container{{Name: "node", Image: image, Command: []string{"python3", "-c", reportScript}}},
						}}},
					},
				}},
			}}},
		})
		DeferCleanup(func() { kubectl(dir, "delete", "trainingruntime", name) })
		apply(dir, &trainer.TrainJob{
			TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: name, Kind: ptr.To(trainer.TrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)}},
		})
		DeferCleanup(func() { kubectl(dir, "delete", "trainjob", name) })
		Eventually(func() string {
			out, _ := kubectl(dir, "get", "trainjob", name, "-o", "jsonpath={.status.trainerStatus.progressPercentage}")
			return out
		}, 3*time.Minute, time.Second).Should(Equal("7"), func() string { return jobReport(dir, name, nil) })
		// The program prints the answer after the status is written.
		Eventually(func() string {
			logs, _ := kubectl(dir, "logs", "-l", "jobset.sigs.k8s.io/jobset-name="+name, "-c", "node")
			return logs
		}, time.Minute, time.Second).Should(HavePrefix("200 "))
	})
}
