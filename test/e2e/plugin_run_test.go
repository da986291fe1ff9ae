package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
)

var _ = Describe("kubectl mpi run", func() {
	BeforeEach(installSampleRuntimes)

	It("runs a job built from flags and waits until it completes", func() {
		ns := newNamespace("plugin-run")
		r := succeed(mpiCmd("-n", ns, "run", "pi", "--image", "mpioperator/mpi-pi:openmpi", "--runtime", "torus-openmpi-e2e",
			"--workers", "2", "--slots-per-worker", "2", "--env", "OMP_NUM_THREADS=1", "--wait", "--timeout", "90s",
			"--", "mpirun", "-n", "4", "/home/mpiuser/pi"))
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/pi created\n"))
		Expect(r.Stderr).To(ContainSubstring("MPI job pi completed"))

		var tj trainer.TrainJob
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi"}, &tj)).To(Succeed())
		Expect(tj.Spec.Trainer.NumNodes).To(Equal(ptr.To[int32](2)))
		Expect(tj.Spec.Trainer.NumProcPerNode).To(Equal(ptr.To[int32](2)))
		Expect(tj.Spec.Trainer.Command).To(Equal([]string{"mpirun"}))
		Expect(tj.Spec.Trainer.Args).To(Equal([]string{"-n", "4", "/home/mpiuser/pi"}))
		Expect(tj.Labels).To(HaveKeyWithValue(api.LabelImplementation, "OpenMPI"))
	})

	It("picks the runtime from --mpi and shows the job the API server would create", func() {
		ns := newNamespace("plugin-run")
		for impl, runtime := range map[string]string{"intel": "torus-intelmpi", "mpich": "torus-mpich", "openmpi5": "torus-openmpi5"} {
			r := succeed(mpiCmd("-n", ns, "run", "job-"+impl, "--mpi", impl, "--image", "img", "--dry-run=server", "-o", "json", "--", "mpirun", "./a"))
			var tj trainer.TrainJob
			Expect(json.Unmarshal([]byte(r.Stdout), &tj)).To(Succeed())
			Expect(tj.Spec.RuntimeRef.Name).To(Equal(runtime))
			// Labelled by Torus's webhook during the dry run.
			Expect(tj.Labels).To(HaveKey(api.LabelImplementation))
		}
		var list trainer.TrainJobList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty(), "a dry run creates nothing")
	})

	It("follows the logs of every pod until the job ends", func() {
		ns := newNamespace("plugin-run")
		r := succeed(mpiCmd("-n", ns, "run", "pi", "--image", "img", "--runtime", "torus-openmpi-e2e", "--workers", "2",
			"--follow", "--timeout", "90s", "--", "mpirun", "./pi"))
		for _, host := range []string{"launcher", "worker-0", "worker-1"} {
			Expect(r.Stdout).To(ContainSubstring("[%s] pi is approximately 3.14", host))
		}
		Expect(r.Stderr).To(ContainSubstring("MPI job pi completed"))
	})

	It("exits 3 with the failing rank and the fix when the job fails", func() {
		ns := newNamespace("plugin-run")
		wait := mpiAsync("-n", ns, "run", "oom", "--image", "img", "--runtime", "torus-openmpi-long", "--workers", "2",
			"--slots-per-worker", "2", "--memory", "1Gi", "--wait", "--", "mpirun", "./oom")
		Eventually(condition(trainJobRef(ns, "oom"), trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		inject(runningPod(trainJobRef(ns, "oom"), api.RoleWorker, 1), "oom")
		r := wait()
		Expect(r.Code).To(Equal(3))
		Expect(r.Stderr).To(ContainSubstring("error: MPI job oom failed: worker-1 (ranks 2-3) OOMKilled: memory limit 1Gi exceeded; raise --memory"))
	})

	It("checks a job before submitting it, and submits nothing wrong", func() {
		ns := newNamespace("plugin-run")
		newQueue(ns, 8)
		cases := []struct {
			args []string
			code int
			want string
		}{
			{[]string{"run", "pi", "--image", "img", "--workers", "0", "--memory", "lots"}, 2,
				"error: --memory=\"lots\" is not a quantity: write it as Kubernetes does, e.g. 512Mi or 16Gi\n--workers=0: a job needs at least 1 worker\n"},
			{[]string{"run", "pi", "--image", "img", "--runtime", "nope"}, 1,
				`error: checking the runtime: ClusterTrainingRuntime "nope" not found: create it, or set spec.runtimeRef to an existing runtime`},
			{[]string{"run", "pi", "--image", "img", "--mpi", "intel", "--runtime", "torus-openmpi-e2e"}, 1,
				`error: --mpi intel does not match ClusterTrainingRuntime "torus-openmpi-e2e", which runs OpenMPI: drop --runtime to use torus-intelmpi, or drop --mpi`},
			{[]string{"run", "pi", "--image", "img", "--queue", "team", "--workers", "4", "--gpus", "4"}, 1,
				fmt.Sprintf(`error: LocalQueue "team" can never admit this job: the workers need 16 nvidia.com/gpu (4 × 4) but the largest flavor of ClusterQueue %q offers 8. Ask for fewer workers or resources, or use another queue`, ns)},
			{[]string{"run", "pi", "--image", "img", "--queue", "nope"}, 1,
				fmt.Sprintf(`error: LocalQueue "nope" not found in namespace %q: use one of team`, ns)},
			{[]string{"run", strings.Repeat("x", 45), "--image", "img"}, 2,
				"an MPI job needs at most 44"},
			{[]string{"run", "pi", "--image", "img", "--volume", "pvc:data:/etc"}, 2,
				"error: --volume pvc:data:/etc would hide the job's hostfile in /etc/mpi: choose another path"},
		}
		for _, tc := range cases {
			r := mpiCmd(append([]string{"-n", ns}, tc.args...)...)
			Expect(r.Code).To(Equal(tc.code), "%v: %s", tc.args, r.Stderr)
			Expect(r.Stderr).To(ContainSubstring(tc.want), "%v", tc.args)
		}
		var list trainer.TrainJobList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	It("runs the TrainJobs and MPIJobs of files, and gives pods volumes, pull secrets and a service account through a runtime patch", func() {
		ns := newNamespace("plugin-run")
		dir := GinkgoT().TempDir()
		jobs := filepath.Join(dir, "jobs.yaml")
		Expect(os.WriteFile(jobs, []byte(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: hello
spec:
  runtimeRef:
    name: torus-mpich-e2e
  trainer:
    numNodes: 2
---
`+mpiOperatorPi()), 0o644)).To(Succeed())
		r := succeed(mpiCmd("-n", ns, "run", "-f", jobs, "--wait", "--timeout", "90s"))
		// The MPIJob's workers read the image's own sshd configuration, which
		// no shipped runtime does: its templates go into a TrainingRuntime.
		Expect(r.Stdout).To(Equal("trainingruntime.trainer.kubeflow.org/pi created\ntrainjob.trainer.kubeflow.org/hello created\ntrainjob.trainer.kubeflow.org/pi created\n"))
		Expect(r.Stderr).To(ContainSubstring(jobs + ":20: MPIJob pi: warning: spec.runPolicy.ttlSecondsAfterFinished"))
		Expect(r.Stderr).To(And(ContainSubstring("MPI job hello completed"), ContainSubstring("MPI job pi completed")))

		By("standard input, JSON")
		succeed(mpiCmdIn(`{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"stdin"},"spec":{"runtimeRef":{"name":"torus-openmpi-e2e"}}}`,
			"-n", ns, "run", "-f", "-"))

		By("a volume, a pull secret, a service account: the job's runtime patch, on the runtime as it is")
		succeed(mpiCmd("-n", ns, "run", "vol", "--image", "img", "--runtime", "torus-openmpi-e2e", "--volume", "pvc:data:/data:ro",
			"--image-pull-secret", "registry", "--service-account", "default", "--", "mpirun", "./a"))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vol"}, &trainer.TrainingRuntime{}))).To(BeTrue(), "no runtime copy")
		var js jobsetv1alpha2.JobSet
		// The operator makes it, on the cluster's time: the suite's timeout.
		Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vol"}, &js) }, timeout, interval).Should(Succeed())
		for _, rj := range js.Spec.ReplicatedJobs {
			ps := rj.Template.Spec.Template.Spec
			Expect(ps.Volumes).To(ContainElement(HaveField("Name", "pvc-data")), rj.Name)
			Expect(ps.ImagePullSecrets).To(ContainElement(HaveField("Name", "registry")), rj.Name)
			Expect(ps.ServiceAccountName).To(Equal("default"), rj.Name)
		}
	})

	It("names the file, document and field the API server refuses, and creates nothing", func() {
		ns := newNamespace("plugin-run")
		bad := filepath.Join(GinkgoT().TempDir(), "bad.yaml")
		Expect(os.WriteFile(bad, []byte(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: good
spec:
  runtimeRef:
    name: torus-openmpi-e2e
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: zero
spec:
  runtimeRef:
    name: torus-openmpi-e2e
  trainer:
    numNodes: 0
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: typo
spec:
  runtimeRef:
    name: torus-openmpi-e2e
  trainer:
    numNode: 2
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: stray
`), 0o644)).To(Succeed())
		r := mpiCmd("-n", ns, "run", "-f", bad)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring(bad + ":29: ConfigMap stray: a ConfigMap (v1) is not an MPI job"))

		// Without the stray document, the API server checks the jobs.
		data, err := os.ReadFile(bad)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(bad, []byte(strings.Split(string(data), "---\napiVersion: v1")[0]), 0o644)).To(Succeed())
		r = mpiCmd("-n", ns, "run", "-f", bad)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("the API server rejected the input; nothing was created"))
		Expect(r.Stderr).To(ContainSubstring(bad + ":9: TrainJob zero: "))
		Expect(r.Stderr).To(ContainSubstring("spec.trainer.numNodes: Invalid value: 0: must be at least 1"))
		Expect(r.Stderr).To(ContainSubstring(bad + ":19: TrainJob typo: "))
		Expect(r.Stderr).To(ContainSubstring(`unknown field "spec.trainer.numNode"`))
		var list trainer.TrainJobList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty(), "the good job is not created either")
	})
})

// mpiOperatorPi is mpi-operator v0.8.2's pi example (examples/v2beta1/pi).
func mpiOperatorPi() string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "plugin", "run", "testdata", "mpijob-pi.yaml"))
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}
