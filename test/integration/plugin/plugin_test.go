package plugin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/describe"
	"github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/plugin/operatorstatus"
	"github.com/torus-mpi/torus/test/framework"
)

func namespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	Expect(fw.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// twoWorkers runs a job of two workers with kubectl mpi run and plays the
// JobSet controller's first report on its JobSet.
func twoWorkers(ns, name string) *trainer.TrainJob {
	GinkgoHelper()
	Expect(kubectlMPI("", "-n", ns, "run", name, "--image", "img", "--workers", "2", "--", "mpirun", "./pi").Err).NotTo(HaveOccurred())
	var tj trainer.TrainJob
	Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj)).To(Succeed())
	framework.ObserveJobSet(ctx, fw.Client, &tj)
	return &tj
}

var _ = Describe("kubectl mpi against the API server", func() {
	It("runs a job the operator picks up, and lists and describes it", func() {
		ns := namespace()
		r := kubectlMPI("", "-n", ns, "run", "pi", "--image", "img", "--mpi", "intel", "--workers", "3", "--slots-per-worker", "2",
			"--cpu", "2", "--memory", "4Gi", "--env", "A=1", "--topology", "cloud.provider.com/topology-rack",
			"--", "mpirun", "./pi")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/pi created\n"))

		var tj trainer.TrainJob
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi"}, &tj)).To(Succeed())
		Expect(tj.Spec.RuntimeRef.Name).To(Equal("torus-intelmpi"))
		Expect(tj.Labels).To(HaveKeyWithValue(api.LabelImplementation, "Intel"))
		Expect(tj.Annotations).To(HaveKeyWithValue(api.AnnotationTopology, "cloud.provider.com/topology-rack"))

		// The operator creates the JobSet, the JobSet controller (played
		// here) takes it up; without kubelets no pod runs.
		framework.ObserveJobSet(ctx, fw.Client, &tj)
		Eventually(func() string { return kubectlMPI("", "-n", ns, "list").Stdout }, framework.Timeout, framework.Interval).
			Should(MatchRegexp(`(?m)^pi\s+Pending\s+0/3\s+6\s+0\s+<none>\s+`))
		// The operator records its events after the status it lists by,
		// through an asynchronous recorder.
		Eventually(func(g Gomega) {
			r = kubectlMPI("", "-n", ns, "describe", "pi")
			g.Expect(r.Err).NotTo(HaveOccurred())
			g.Expect(r.Stdout).To(MatchRegexp(`Normal\s+JobSetCreated\s+trainjob/pi`))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(r.Stdout).To(MatchRegexp(`State:\s+Pending for`))
		Expect(r.Stdout).To(MatchRegexp(`MPI:\s+Intel MPI: 3 workers × 2 slots = 6 ranks; the launcher runs no ranks`))
		Expect(r.Stdout).To(MatchRegexp(`Per worker:\s+cpu 2, memory 4Gi`))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^\s+4-5\s+worker-2\s+<none>\s+NotCreated`))

		// Long enough for the wait's first read of the job on a loaded
		// machine: it says the job's state only once it has read it.
		r = kubectlMPI("", "-n", ns, "wait", "pi", "--timeout", "5s")
		Expect(r.Code).To(Equal(4))
		Expect(r.Err).To(MatchError(ContainSubstring("timed out after 5s waiting for MPI job pi to be Complete; it is Pending")))

		r = kubectlMPI("", "-n", ns, "rerun", "pi", "--workers", "4")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/pi-2 created\n"))
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pi-2"}, &tj)).To(Succeed())
		Expect(*tj.Spec.Trainer.NumNodes).To(Equal(int32(4)))
		Expect(tj.Annotations).To(HaveKeyWithValue(api.AnnotationRerunOf, "pi"))

		r = kubectlMPI("", "-n", ns, "delete", "pi", "pi-2")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/pi deleted\ntrainjob.trainer.kubeflow.org/pi-2 deleted\n"))
	})

	It("gives a job's pods volumes, pull secrets and a service account through its runtime patch, on the runtime as it is", func() {
		ns := namespace()
		r := kubectlMPI("", "-n", ns, "run", "vol", "--image", "img", "--volume", "pvc:data:/data:ro", "--image-pull-secret", "registry",
			"--service-account", "trainer", "--env", "EPOCHS=3", "--", "mpirun", "./a")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/vol created\n"))
		Expect(apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vol"}, &trainer.TrainingRuntime{}))).To(BeTrue(), "no runtime copy")
		var tj trainer.TrainJob
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vol"}, &tj)).To(Succeed())
		Expect(tj.Spec.RuntimePatches).To(ConsistOf(HaveField("Manager", "torus-mpi.io/kubectl-mpi")))
		Expect(tj.Spec.Trainer.Env).To(ConsistOf(corev1.EnvVar{Name: "EPOCHS", Value: "3"}))
		expectPodPatch := func(name string, mounts ...string) {
			GinkgoHelper()
			var js jobsetv1alpha2.JobSet
			Eventually(func() error { return fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js) }, framework.Timeout, framework.Interval).Should(Succeed())
			for _, rj := range js.Spec.ReplicatedJobs {
				ps := rj.Template.Spec.Template.Spec
				Expect(ps.ServiceAccountName).To(Equal("trainer"), rj.Name)
				Expect(ps.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "registry"}), rj.Name)
				Expect(ps.Volumes).To(ContainElement(HaveField("PersistentVolumeClaim.ClaimName", "data")), rj.Name)
				var paths []string
				for _, m := range ps.Containers[0].VolumeMounts {
					paths = append(paths, m.MountPath)
				}
				Expect(paths).To(ContainElements(mounts), rj.Name)
			}
		}
		expectPodPatch("vol", "/data")

		By("a rerun keeps them, and adds a volume")
		r = kubectlMPI("", "-n", ns, "rerun", "vol", "--volume", "pvc:out:/out")
		Expect(r.Err).NotTo(HaveOccurred())
		expectPodPatch("vol-2", "/data", "/out")

		By("a rerun of a job that ran on a runtime copy: the runtime it copied, the copy's volumes in the patch")
		var base trainer.ClusterTrainingRuntime
		Expect(fw.Client.Get(ctx, client.ObjectKey{Name: "torus-openmpi"}, &base)).To(Succeed())
		copied := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns,
			Annotations: map[string]string{api.AnnotationRuntimeCopyOf: "ClusterTrainingRuntime/torus-openmpi"}}, Spec: *base.Spec.DeepCopy()}
		for i := range copied.Spec.Template.Spec.ReplicatedJobs {
			ps := &copied.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "pvc-data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
			ps.Containers[0].VolumeMounts = append(ps.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "pvc-data", MountPath: "/data"})
		}
		Expect(fw.Client.Create(ctx, copied)).To(Succeed())
		Expect(fw.Client.Create(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "old", Kind: ptr.To(trainer.TrainingRuntimeKind)}}})).To(Succeed())
		r = kubectlMPI("", "-n", ns, "rerun", "old", "--image-pull-secret", "registry", "--service-account", "trainer")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old-2"}, &tj)).To(Succeed())
		Expect(tj.Spec.RuntimeRef.Name).To(Equal("torus-openmpi"))
		expectPodPatch("old-2", "/data")

		By("names that are no Secret or ServiceAccount are refused before anything is sent")
		r = kubectlMPI("", "-n", ns, "run", "bad", "--image", "img", "--image-pull-secret", "Registry", "--service-account", "robot_1", "--", "mpirun", "./a")
		Expect(r.Err).To(MatchError(And(ContainSubstring(`--image-pull-secret "Registry" is not a Secret name`), ContainSubstring(`--service-account "robot_1" is not a ServiceAccount name`))))
	})

	It("shows and reaches only the pods of a job's own Jobs, not pods that wear its labels", func() {
		ns := namespace()
		tj := twoWorkers(ns, "worn")
		node := framework.JobOf(ctx, fw.Client, tj, "node")
		running := func(name string, owners ...metav1.OwnerReference) *corev1.Pod {
			GinkgoHelper()
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners, Labels: map[string]string{
					api.LabelJobName: "worn", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "0",
				}},
				Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "node", Image: "img"}}},
			}
			Expect(fw.Client.Create(ctx, p)).To(Succeed())
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
			Expect(fw.Client.Status().Update(ctx, p)).To(Succeed())
			return p
		}
		planted := running("worn-planted")
		forged := running("worn-forged", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: node.Name, UID: "d5e4c3b2-0000-4000-8000-000000000000", Controller: ptr.To(true)})
		ownPod := &corev1.Pod{}
		framework.ControlledBy(ownPod, node)
		own := running("worn-node-0-0-abcde", ownPod.OwnerReferences...)

		r := kubectlMPI("", "-n", ns, "describe", "worn")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(ContainSubstring(own.Name))
		Expect(r.Stdout).NotTo(ContainSubstring(planted.Name))
		Expect(r.Stdout).NotTo(ContainSubstring(forged.Name))

		// logs -f and run -f meet pods one at a time.
		owner := job.NewOwner(fw.Client, tj)
		Expect(owner.Owns(ctx, own)).To(BeTrue())
		Expect(owner.Owns(ctx, planted)).To(BeFalse())
		Expect(owner.Owns(ctx, forged)).To(BeFalse())
	})

	It("glances at a job's running pods through their Table only where the Job controller's counts agree", func() {
		ns := namespace()
		tj := twoWorkers(ns, "glance")
		launcher, node := framework.JobOf(ctx, fw.Client, tj, mpi.LauncherJob), framework.JobOf(ctx, fw.Client, tj, mpi.NodeJob)
		// A pod as its kubelet reports it started: the API server's
		// Table shows it Running, 1/1 ready, never restarted. Its sshd
		// answers the kubelet's probe on 2222, as a worker's does.
		running := func(name, role string, index int, owner *batchv1.Job) *corev1.Pod {
			GinkgoHelper()
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
					api.LabelJobName: "glance", api.LabelRole: role, "batch.kubernetes.io/job-completion-index": fmt.Sprint(index),
				}},
				Spec: corev1.PodSpec{NodeName: "node-" + name[len(name)-5:], RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: mpi.TrainerContainer, Image: "img",
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2222)}}},
				}}},
			}
			if owner != nil {
				framework.ControlledBy(p, owner)
			}
			Expect(fw.Client.Create(ctx, p)).To(Succeed())
			started := metav1.Now()
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: mpi.TrainerContainer, Image: "img", Ready: true,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
			Expect(fw.Client.Status().Update(ctx, p)).To(Succeed())
			return p
		}
		// What the Job controller would count of its Job's pods.
		counted := func(j *batchv1.Job, ready int32) {
			GinkgoHelper()
			Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(j), j)).To(Succeed())
			j.Status.Active, j.Status.Ready = ready, ptr.To(ready)
			Expect(fw.Client.Status().Update(ctx, j)).To(Succeed())
		}
		kube, err := kubernetes.NewForConfig(fw.Config)
		Expect(err).NotTo(HaveOccurred())
		tables := job.NewPodTables(kube)
		// describe and the dashboard's job page say of the job what they
		// would say from every pod read whole.
		sameAsWhole := func() describe.View {
			GinkgoHelper()
			now := time.Now()
			glanced, whole := describe.Describe(ctx, fw.Client, tables, tj, now), describe.Describe(ctx, fw.Client, nil, tj, now)
			Expect(glanced.Problems).To(BeEmpty())
			Expect(glanced.Hosts).To(Equal(whole.Hosts))
			Expect(glanced.Findings).To(Equal(whole.Findings))
			Expect(glanced.Headline).To(Equal(whole.Headline))
			return glanced
		}
		own := []*corev1.Pod{
			running(launcher.Name+"-0-aaaaa", api.RoleLauncher, 0, launcher),
			running(node.Name+"-0-bbbbb", api.RoleWorker, 0, node),
			running(node.Name+"-1-ccccc", api.RoleWorker, 1, node),
		}
		counted(launcher, 1)
		counted(node, 2)

		By("every host plainly running is shown from its row, and only the launcher and the first worker are read whole")
		glance, err := job.GlancePods(ctx, fw.Client, tables, tj)
		Expect(err).NotTo(HaveOccurred())
		Expect(glance.Pods).To(HaveLen(2))
		Expect([]string{glance.Pods[0].Name, glance.Pods[1].Name}).To(Equal([]string{own[0].Name, own[1].Name}))
		for _, p := range own[:2] {
			h := job.HostOf(p)
			_, shown := glance.RunningOf(h.Role, h.Index)
			Expect(shown).To(BeFalse(), h.Name())
		}
		h := job.HostOf(own[2])
		row, shown := glance.RunningOf(h.Role, h.Index)
		Expect(shown).To(BeTrue(), h.Name())
		Expect(row).To(Equal(job.RunningPod{Name: own[2].Name, Node: own[2].Spec.NodeName}), h.Name())
		sameAsWhole()
		r := kubectlMPI("", "-n", ns, "describe", "glance")
		Expect(r.Err).NotTo(HaveOccurred())
		for _, p := range own {
			Expect(r.Stdout).To(MatchRegexp(`(?m)^\s+\S+\s+%s\s+%s\s+%s\s+Running\s+0\s*$`, job.HostOf(p).Name(), p.Name, p.Spec.NodeName))
		}

		By("a launcher refused by the workers' sshd is diagnosed from the facts of a worker read whole")
		own[0].Status.Phase = corev1.PodFailed
		own[0].Status.Conditions = nil
		own[0].Status.ContainerStatuses[0].Ready = false
		own[0].Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 255, Reason: "Error",
			Message: "ssh: connect to host glance-node-0-1.glance port 2222: Connection refused", FinishedAt: metav1.Now()}}
		Expect(fw.Client.Status().Update(ctx, own[0])).To(Succeed())
		counted(launcher, 0)
		view := sameAsWhole()
		Expect(view.Findings).To(ContainElement(HaveField("Detail", ContainSubstring("a NetworkPolicy rejects the launcher's connection"))))

		By("a pod that wears the name of a host whose own pod is gone is not shown")
		Expect(fw.Client.Delete(ctx, own[2], client.GracePeriodSeconds(0))).To(Succeed())
		counted(node, 1)
		planted := running(node.Name+"-1-zzzzz", api.RoleWorker, 1, nil)
		glance, err = job.GlancePods(ctx, fw.Client, tables, tj)
		Expect(err).NotTo(HaveOccurred())
		_, shown = glance.RunningOf(api.RoleWorker, 1)
		Expect(shown).To(BeFalse())
		Expect(glance.Pods).To(HaveLen(2))
		for _, p := range glance.Pods {
			Expect(p.Name).NotTo(Equal(planted.Name))
		}
		sameAsWhole()
		r = kubectlMPI("", "-n", ns, "describe", "glance")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).NotTo(ContainSubstring(planted.Name))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^\s+\S+\s+worker-1\s+<none>\s+NotCreated\s*$`))
	})

	It("lists a page at a time, in namespace and name order, as one table", func() {
		ns := namespace()
		// A long name on the first page: a page printed on its own would
		// align its columns narrower.
		for _, name := range []string{"c", "a", "e", "b-with-a-longer-name", "d"} {
			r := kubectlMPI("", "-n", ns, "run", name, "--image", "img", "--", "mpirun", "./pi")
			Expect(r.Err).NotTo(HaveOccurred())
		}
		// Two jobs a request: three pages.
		r := kubectlMPI("", "-n", ns, "list", "--chunk-size", "2")
		Expect(r.Err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		Expect(lines).To(HaveLen(6), r.Stdout)
		Expect(lines[0]).To(MatchRegexp(`^NAME\s+STATE\s+WORKERS`))
		// One tab writer for every page: the columns line up.
		stateColumn := regexp.MustCompile(`^\S+\s+`)
		for i, name := range []string{"a", "b-with-a-longer-name", "c", "d", "e"} {
			Expect(lines[i+1]).To(HavePrefix(name + " "))
			Expect(stateColumn.FindString(lines[i+1])).To(HaveLen(len(stateColumn.FindString(lines[0]))), r.Stdout)
		}
		r = kubectlMPI("", "-n", ns, "list", "--chunk-size", "2", "-o", "name")
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/a\ntrainjob.trainer.kubeflow.org/b-with-a-longer-name\ntrainjob.trainer.kubeflow.org/c\ntrainjob.trainer.kubeflow.org/d\ntrainjob.trainer.kubeflow.org/e\n"))
		r = kubectlMPI("", "-n", ns, "list", "--chunk-size", "2", "-o", "json")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(strings.Count(r.Stdout, `"kind": "TrainJob"`)).To(Equal(5))
		Expect(r.Stdout).To(ContainSubstring(`"kind": "TrainJobList"`))
	})

	It("shows a job the operator will not start as Blocked, with why", func() {
		ns := namespace()
		r := kubectlMPI("", "-n", ns, "run", "ib", "--image", "img", "--network", "no-such-profile", "--", "mpirun", "./a")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ib"}, &trainer.TrainJob{})).To(Succeed())
		Eventually(func() string { return kubectlMPI("", "-n", ns, "list").Stdout }, framework.Timeout, framework.Interval).
			Should(MatchRegexp(`(?m)^ib\s+Blocked\s+`))
		r = kubectlMPI("", "-n", ns, "describe", "ib")
		Expect(r.Stdout).To(MatchRegexp(`State:\s+Blocked for`))
		Expect(r.Stdout).To(MatchRegexp(`Waiting:\s+.*no-such-profile`))
		Expect(r.Stdout).To(MatchRegexp(`Network:\s+no-such-profile`))
	})

	It("shows what the webhooks would say without creating anything", func() {
		ns := namespace()
		r := kubectlMPI("", "-n", ns, "run", "pi", "--image", "img", "--dry-run=server", "-o", "yaml", "--", "mpirun", "./pi")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(ContainSubstring("torus-mpi.io/mpi-implementation: OpenMPI"))
		var list trainer.TrainJobList
		Expect(fw.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	It("refuses a job its queue can never admit", func() {
		ns := namespace()
		cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory},
				Flavors: []kueue.FlavorQuotas{{Name: "default", Resources: []kueue.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("16")},
					{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("64Gi")},
				}}},
			}},
		}}
		Expect(fw.Client.Create(ctx, cq)).To(Succeed())
		lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(ns)}}
		Expect(fw.Client.Create(ctx, lq)).To(Succeed())

		r := kubectlMPI("", "-n", ns, "run", "big", "--image", "img", "--queue", "team", "--workers", "8", "--cpu", "4")
		Expect(r.Code).To(Equal(1))
		Expect(r.Err).To(MatchError(fmt.Sprintf(`LocalQueue "team" can never admit this job: the workers need 32 cpu (8 × 4) but the largest flavor of ClusterQueue %q offers 16. Ask for fewer workers or resources, or use another queue`, ns)))
		r = kubectlMPI("", "-n", ns, "run", "gpu", "--image", "img", "--queue", "team", "--gpus", "1")
		Expect(r.Err).To(MatchError(ContainSubstring(`the workers request nvidia.com/gpu, which ClusterQueue %q does not cover`, ns)))
		r = kubectlMPI("", "-n", ns, "run", "fits", "--image", "img", "--queue", "team", "--workers", "2", "--cpu", "4")
		Expect(r.Err).NotTo(HaveOccurred())
	})

	It("checks every document of -f with the API server before creating any", func() {
		ns := namespace()
		dir := GinkgoT().TempDir()
		good := `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: good
spec:
  runtimeRef:
    name: torus-openmpi
`
		bad := good + `---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: reserved
spec:
  runtimeRef:
    name: torus-mpich
  trainer:
    env:
    - name: HYDRA_HOST_FILE
      value: /tmp/mine
`
		path := filepath.Join(dir, "jobs.yaml")
		Expect(os.WriteFile(path, []byte(bad), 0o644)).To(Succeed())
		r := kubectlMPI("", "-n", ns, "run", "-f", path)
		Expect(r.Code).To(Equal(1))
		Expect(r.Err).To(MatchError(ContainSubstring(path + ":9: TrainJob reserved: ")))
		Expect(r.Err).To(MatchError(ContainSubstring("spec.trainer.env[0].name: Forbidden: HYDRA_HOST_FILE is set by Torus")))
		var list trainer.TrainJobList
		Expect(fw.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())

		r = kubectlMPI(good, "-n", ns, "run", "-f", "-", "-o", "name")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(Equal("trainjob.trainer.kubeflow.org/good\n"))

		r = kubectlMPI(strings.Replace(good, "name: good", "name: other\n  namespace: "+ns, 1), "-n", "default", "run", "-f", "-")
		Expect(r.Code).To(Equal(1))
		Expect(r.Err).To(MatchError(ContainSubstring(fmt.Sprintf(`<stdin>:1: TrainJob %s/other: its namespace %q does not match --namespace "default": drop one of them`, ns, ns))))
	})

	It("doctor finds the APIs and webhooks, and no operator lease in envtest", func() {
		r := kubectlMPI("", "doctor")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^PASS\s+Trainer CRDs`))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^PASS\s+Torus webhooks\s+answering`))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^FAIL\s+Torus operator\s+no Torus operator has ever run in this cluster`))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^PASS\s+MPI runtimes\s+MPI runtimes: torus-intelmpi, torus-mpich, torus-openmpi, torus-openmpi5, torus-python`))
	})

	// The manager of this suite runs without leader election, so no lease
	// says whether it runs; the spec writes the lease a dead operator
	// leaves behind. Its job is MultiKueue's (spec.managedBy), which the
	// manager leaves alone as a dead operator would: it stays Creating.
	It("says the operator is not running, and stops waiting at once", func() {
		ns := namespace()
		system := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorstatus.DefaultNamespace}}
		if err := fw.Client.Create(ctx, system); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: operatorstatus.LeaseName, Namespace: operatorstatus.DefaultNamespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("torus-operator-5d8c7b9f4-x2x7q_0b5f"),
				LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime:          ptr.To(metav1.NewMicroTime(time.Now().Add(-time.Hour))),
				RenewTime:            ptr.To(metav1.NewMicroTime(time.Now().Add(-3 * time.Minute))),
			},
		}
		Expect(fw.Client.Create(ctx, lease)).To(Succeed())
		// The other specs run without a lease, as the suite starts.
		DeferCleanup(func() { Expect(fw.Client.Delete(ctx, lease)).To(Succeed()) })

		tj := mpi.NewTrainJob("pi-demo", ns)
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torus-openmpi", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
		tj.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())

		const notRunning = `the Torus operator is not running \(last lease renewal 3m\d*s? ago in namespace torus-system\)`
		r := kubectlMPI("", "-n", ns, "describe", "pi-demo")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(MatchRegexp(`State:\s+Creating for`))
		Expect(r.Stdout).To(MatchRegexp(`Waiting:\s+` + notRunning))
		Expect(r.Stdout).To(MatchRegexp(`Fix:\s+check its pods and logs: kubectl -n torus-system get pods`))
		Expect(r.Stdout).NotTo(ContainSubstring("Waiting for the Torus operator to create"))

		start := time.Now()
		r = kubectlMPI("", "-n", ns, "wait", "pi-demo", "--for=condition=Complete", "--timeout", "1m")
		Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second), "the wait must end at once, not at its timeout")
		Expect(r.Code).To(Equal(1))
		Expect(r.Err).To(MatchError(MatchRegexp(`^MPI job pi-demo cannot progress: ` + notRunning + `; check its pods and logs: kubectl -n torus-system get pods`)))

		// A replica renews the lease: the job waits for it as usual.
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease)).To(Succeed())
		lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		Expect(fw.Client.Update(ctx, lease)).To(Succeed())
		r = kubectlMPI("", "-n", ns, "describe", "pi-demo")
		Expect(r.Err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(MatchRegexp(`Waiting:\s+Waiting for the Torus operator to create the job's JobSet, and the JobSet controller to start it`))
		Expect(r.Stdout).NotTo(ContainSubstring("not running"))
	})
})
