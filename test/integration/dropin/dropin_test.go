package dropin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	trainerclient "github.com/kubeflow/trainer/v2/pkg/client/clientset/versioned"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/operator/app"
	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
	"github.com/torus-mpi/torus/test/localcluster/upstreamtrainer"
)

// job is one TrainJob of the comparison, created alike in both namespaces.
type job struct {
	name, runtime string
	numNodes      int32
	suspend       bool
	// end is the JobSet condition the spec writes once the JobSet exists,
	// standing for the JobSet controller, so that both controllers map the
	// same JobSet status to a TrainJob status: "", Completed or Failed.
	end jobsetv1alpha2.JobSetConditionType
	mpi bool
	// patches are the job's runtimePatches.
	patches []trainer.RuntimePatch
}

var jobs = []job{
	{name: "torch", runtime: "torch-distributed", numNodes: 2, end: jobsetv1alpha2.JobSetCompleted},
	{name: "torch-failed", runtime: "torch-distributed", numNodes: 2, end: jobsetv1alpha2.JobSetFailed},
	{name: "torch-suspended", runtime: "torch-distributed", numNodes: 2, suspend: true},
	{name: "torch-running", runtime: "torch-distributed", numNodes: 3},
	{name: "jax", runtime: "jax-distributed", numNodes: 2, end: jobsetv1alpha2.JobSetCompleted},
	{name: "xgboost", runtime: "xgboost-distributed", numNodes: 2, end: jobsetv1alpha2.JobSetCompleted},
	{name: "plain", runtime: "plain", numNodes: 1, end: jobsetv1alpha2.JobSetCompleted},
	{name: "deepspeed", runtime: "deepspeed-distributed", numNodes: 2, end: jobsetv1alpha2.JobSetCompleted, mpi: true},
	{name: "deepspeed-patched", runtime: sidecarRuntime, numNodes: 2, end: jobsetv1alpha2.JobSetCompleted, mpi: true, patches: userPatches},
}

// sidecarRuntime is upstream's deepspeed-distributed runtime with a sidecar
// beside the workers' MPI container: the node container's env is the
// TrainJob's (spec.trainer.env), so a patch's env goes to another one.
const sidecarRuntime = "deepspeed-sidecar"

// userPatches are what a user's job asks of its pods through runtimePatches
// (kubectl mpi run's --volume, --image-pull-secret, --service-account): a
// volume and its mount, an image pull secret, a service account; and env
// for the sidecar.
var userPatches = func() []trainer.RuntimePatch {
	pod := trainer.PodSpecPatch{
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets", ReadOnly: true}}}},
		Containers:         []trainer.ContainerPatch{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}}},
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
		ServiceAccountName: ptr.To("trainer"),
	}
	worker := pod.DeepCopy()
	worker.Containers = append(worker.Containers, trainer.ContainerPatch{Name: "sidecar", Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}})
	rj := func(name string, ps *trainer.PodSpecPatch) trainer.ReplicatedJobPatch {
		return trainer.ReplicatedJobPatch{Name: name, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: ps}}}}
	}
	return []trainer.RuntimePatch{{Manager: "torus-mpi.io/kubectl-mpi", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{
			rj("launcher", &pod), rj("node", worker),
		}}},
	}}}
}()

// patchedFields are the pod-template fields userPatches set, per
// replicated job, as a JobSet has them.
func patchedFields(js *jobsetv1alpha2.JobSet) map[string]any {
	out := map[string]any{}
	for _, rj := range js.Spec.ReplicatedJobs {
		ps := rj.Template.Spec.Template.Spec
		out[rj.Name+" serviceAccountName"] = ps.ServiceAccountName
		out[rj.Name+" imagePullSecrets"] = ps.ImagePullSecrets
		for _, v := range ps.Volumes {
			if v.Name == "data" {
				out[rj.Name+" volume"] = v
			}
		}
		for _, c := range ps.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == "data" {
					out[rj.Name+" "+c.Name+" mount"] = m
				}
			}
			if c.Name == "sidecar" {
				out[rj.Name+" sidecar env"] = c.Env
			}
		}
	}
	return out
}

// jobsOf is the MPI jobs, or the others.
func jobsOf(mpi bool) []job {
	var out []job
	for _, j := range jobs {
		if j.mpi == mpi {
			out = append(out, j)
		}
	}
	return out
}

// outcome is what a controller made of one TrainJob.
type outcome struct {
	jobSet     *jobsetv1alpha2.JobSet
	snapshot   *corev1.ConfigMap
	conditions []metav1.Condition
	jobsStatus []trainer.JobStatus
	// hostfile is an MPI job's, from where its launcher mounts it: upstream's
	// ConfigMap, or Torus's Secret.
	hostfile map[string]string
}

var _ = Describe("TrainJobs reconciled by upstream Trainer v2.3.0 and then by Torus", Ordered, func() {
	var (
		upstreamNS, torusNS string
		upstream, torus     map[string]outcome
		// upstreamEnvPatch is upstream's answer to envPatchJob.
		upstreamEnvPatch error
	)

	BeforeAll(func(sctx SpecContext) {
		stop := startUpstream()
		createRuntimes(sctx)
		upstreamNS = fw.NewNamespace(sctx, "upstream").Name
		upstream = runJobs(sctx, upstreamNS)
		upstreamEnvPatch = fw.Client.Create(sctx, envPatchJob(upstreamNS))
		stop()

		fw.StartManager(controller.Options{})
		torusNS = fw.NewNamespace(sctx, "torus").Name
		torus = runJobs(sctx, torusNS)
	})

	It("builds the same JobSet, from the same runtime snapshot, for every TrainJob that is not MPI", func() {
		for _, j := range jobsOf(false) {
			By(j.name)
			u, t := upstream[j.name], torus[j.name]
			Expect(differences(u.jobSet, t.jobSet)).To(BeEmpty(), "JobSet spec of %s", j.name)
			Expect(t.jobSet.Labels).To(Equal(u.jobSet.Labels), "JobSet labels of %s", j.name)
			Expect(t.jobSet.Annotations).To(Equal(u.jobSet.Annotations), "JobSet annotations of %s", j.name)
			Expect(owners(t.jobSet)).To(Equal(owners(u.jobSet)))
			Expect(t.snapshot.Data).To(Equal(u.snapshot.Data), "runtime snapshot of %s", j.name)
		}
	})

	It("reports the same status for every TrainJob that is not MPI", func() {
		for _, j := range jobsOf(false) {
			By(j.name)
			u, t := upstream[j.name], torus[j.name]
			Expect(comparable(t.conditions)).To(Equal(comparable(u.conditions)), "conditions of %s", j.name)
			Expect(t.jobsStatus).To(Equal(u.jobsStatus), "jobsStatus of %s", j.name)
		}
	})

	It("builds MPI JobSets that differ from upstream's only where docs/contributors/architecture.md's table says why", func() {
		for _, j := range jobsOf(true) {
			By(j.name)
			got := differences(upstream[j.name].jobSet, torus[j.name].jobSet)
			GinkgoWriter.Printf("%s: %d differences\n%s\n", j.name, len(got), strings.Join(got, "\n"))
			Expect(got).To(Equal(mpiDifferences))
			// The same hosts and slots; with runLauncherAsNode Torus lists
			// the launcher first, so that rank 0 runs where mpirun does.
			up, tor := lines(upstream[j.name].hostfile["hostfile"]), lines(torus[j.name].hostfile["hostfile"])
			Expect(tor).To(ConsistOf(up), "hostfile of %s", j.name)
			Expect(tor[0]).To(HavePrefix(j.name+"-launcher-0-0."), "hostfile of %s", j.name)
		}
	})

	It("applies a job's runtimePatches to its MPI pods as upstream does: volumes, mounts, image pull secrets, service account, env", func() {
		u, t := upstream["deepspeed-patched"].jobSet, torus["deepspeed-patched"].jobSet
		want := patchedFields(u)
		Expect(want).To(HaveKeyWithValue("launcher serviceAccountName", "trainer"), "upstream applied the patches")
		Expect(want).To(HaveKeyWithValue("node sidecar env", ConsistOf(corev1.EnvVar{Name: "LOG_LEVEL", Value: "debug"})))
		Expect(want).To(HaveKey("launcher node mount"))
		Expect(want).To(HaveKey("node node mount"))
		Expect(patchedFields(t)).To(Equal(want))
	})

	It("refuses, as upstream does, a runtime patch of the node container's env, which is the TrainJob's", func(sctx SpecContext) {
		err := fw.Client.Create(sctx, envPatchJob(torusNS))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("containers[0].env: Forbidden: the node container's environment is the TrainJob's: set it in spec.trainer.env"))
		Expect(upstreamEnvPatch).To(HaveOccurred(), "upstream admitted it")
		Expect(upstreamEnvPatch.Error()).To(ContainSubstring("must not have envs for the dataset-initializer, model-initializer, node containers"))
	})

	It("serves clients written for upstream: its generated clientset creates, lists, watches and reads TrainJobs of either kind", func(sctx SpecContext) {
		cs, err := trainerclient.NewForConfig(fw.Config)
		Expect(err).NotTo(HaveOccurred())
		tjs := cs.TrainerV1alpha1().TrainJobs(torusNS)
		w, err := tjs.Watch(sctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		for _, rt := range []string{"torch-distributed", "deepspeed-distributed"} {
			_, err := tjs.Create(sctx, &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: "sdk-" + rt},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: trainer.RuntimeRef{Name: rt},
					Suspend:    ptr.To(true),
					Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
				},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "creating a TrainJob on %s", rt)
		}
		// Each job's status reaches watchers: both report themselves
		// suspended, upstream's job through upstream's reconciler and the
		// MPI job through Torus's.
		// The watch starts with the namespace's jobs as they are, among
		// them runJobs' suspended one: only these two count.
		suspended := map[string]bool{}
		Eventually(w.ResultChan(), framework.Timeout).Should(Receive(Satisfy(func(e watch.Event) bool {
			if tj, ok := e.Object.(*trainer.TrainJob); ok && strings.HasPrefix(tj.Name, "sdk-") && meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended) {
				suspended[tj.Name] = true
			}
			return len(suspended) == 2
		})))
		list, err := tjs.List(sctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(len(jobs) + 2))
		got, err := tjs.Get(sctx, "sdk-deepspeed-distributed", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobSuspended)).To(BeTrue())
	})

	It("leaves the jobs upstream started as they were: no JobSet recreated or rewritten, no status changed", func() {
		Consistently(func(g Gomega) {
			for _, j := range jobs {
				before := upstream[j.name]
				var js jobsetv1alpha2.JobSet
				g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: upstreamNS, Name: j.name}, &js)).To(Succeed())
				g.Expect(js.UID).To(Equal(before.jobSet.UID), "JobSet of %s recreated", j.name)
				g.Expect(js.ResourceVersion).To(Equal(before.jobSet.ResourceVersion), "JobSet of %s rewritten", j.name)
				var tj trainer.TrainJob
				g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: upstreamNS, Name: j.name}, &tj)).To(Succeed())
				g.Expect(comparable(tj.Status.Conditions)).To(Equal(comparable(before.conditions)), "status of %s", j.name)
			}
		}, framework.ShortWindow, framework.Interval).Should(Succeed())
	})

	It("keeps a started job on the path it started on when its runtime changes to the other kind", func(sctx SpecContext) {
		specOf := func(name string) trainer.TrainingRuntimeSpec {
			var ctr trainer.ClusterTrainingRuntime
			Expect(fw.Client.Get(sctx, client.ObjectKey{Name: name}, &ctr)).To(Succeed())
			return ctr.Spec
		}
		mpiSpec, torchSpec := specOf("deepspeed-distributed"), specOf("torch-distributed")
		start := func(name string, spec trainer.TrainingRuntimeSpec) *jobsetv1alpha2.JobSet {
			GinkgoHelper()
			rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: torusNS}, Spec: spec}
			Expect(fw.Client.Create(sctx, rt)).To(Succeed())
			tj := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: torusNS},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: trainer.RuntimeRef{Name: name, Kind: ptr.To(trainer.TrainingRuntimeKind)},
					Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"python3", "train.py"}},
				},
			}
			framework.AwaitAdmitted(sctx, fw.Client, tj)
			Expect(fw.Client.Create(sctx, tj)).To(Succeed())
			var js jobsetv1alpha2.JobSet
			Eventually(func() error { return fw.Client.Get(sctx, client.ObjectKeyFromObject(tj), &js) }, framework.Timeout, framework.Interval).Should(Succeed())
			return &js
		}
		flip := func(name string, spec trainer.TrainingRuntimeSpec) {
			GinkgoHelper()
			Eventually(func() error {
				var rt trainer.TrainingRuntime
				if err := fw.Client.Get(sctx, client.ObjectKey{Namespace: torusNS, Name: name}, &rt); err != nil {
					return err
				}
				rt.Spec = spec
				return fw.Client.Update(sctx, &rt)
			}, framework.Timeout, framework.Interval).Should(Succeed())
		}
		wasMPI, wasTorch := start("was-mpi", mpiSpec), start("was-torch", torchSpec)
		Expect(wasMPI.Annotations).To(HaveKey(api.AnnotationJob), "Torus made the MPI job's JobSet")
		Expect(wasTorch.Annotations).NotTo(HaveKey(api.AnnotationJob), "upstream's framework made the other's")
		flip("was-mpi", torchSpec)
		flip("was-torch", mpiSpec)
		Consistently(func(g Gomega) {
			for _, before := range []*jobsetv1alpha2.JobSet{wasMPI, wasTorch} {
				var js jobsetv1alpha2.JobSet
				g.Expect(fw.Client.Get(sctx, client.ObjectKeyFromObject(before), &js)).To(Succeed())
				g.Expect(js.UID).To(Equal(before.UID), "JobSet of %s recreated", before.Name)
				g.Expect(js.ResourceVersion).To(Equal(before.ResourceVersion), "JobSet of %s rewritten", before.Name)
				var tj trainer.TrainJob
				g.Expect(fw.Client.Get(sctx, client.ObjectKeyFromObject(before), &tj)).To(Succeed())
				created := meta.FindStatusCondition(tj.Status.Conditions, trainjob.ConditionCreated)
				g.Expect(created == nil || created.Status != metav1.ConditionFalse).To(BeTrue(), "%s: %v", before.Name, created)
			}
		}, framework.ShortWindow, framework.Interval).Should(Succeed())

		By("the MPI job ends on Torus's path: its keys go with it")
		keys := client.ObjectKey{Namespace: torusNS, Name: mpi.SSHSecretName(wasMPI.Name)}
		Expect(fw.Client.Get(sctx, keys, &corev1.Secret{})).To(Succeed())
		endJobSet(sctx, wasMPI, jobsetv1alpha2.JobSetCompleted)
		Eventually(func() bool {
			return apierrors.IsNotFound(fw.Client.Get(sctx, keys, &corev1.Secret{}))
		}, framework.Timeout, framework.Interval).Should(BeTrue(), "the SSH keys of a finished MPI job are deleted")
	})

	// Last: upstream's webhook configuration, once created, calls a
	// Service that is not there.
	It("refuses to start beside upstream's controller, naming what to remove", func(sctx SpecContext) {
		Expect(app.CheckNoUpstreamTrainer(sctx, fw.Client)).To(Succeed())
		objs, err := render.Objects(filepath.Join(framework.ModuleDir(upstreamtrainer.Module), "manifests", "base", "webhook"))
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			if o.GetKind() != "ValidatingWebhookConfiguration" {
				continue
			}
			// As upstream's manager overlay installs it.
			for _, w := range o.Object["webhooks"].([]any) {
				Expect(unstructured.SetNestedField(w.(map[string]any), "kubeflow-system", "clientConfig", "service", "namespace")).To(Succeed())
			}
			Expect(fw.Client.Create(sctx, o)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(fw.Client.Delete(ctx, o)).To(Succeed()) })
		}
		err = app.CheckNoUpstreamTrainer(sctx, fw.Client)
		var installed *app.UpstreamInstalledError
		Expect(errors.As(err, &installed)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring("remove its Deployment kubeflow-system/kubeflow-trainer-controller-manager")))
	})
})

// mpiDifferences are where Torus's JobSet for a TrainJob on upstream's
// deepspeed-distributed runtime differs from upstream's; the
// drop-in table of docs/contributors/architecture.md justifies each and
// gives the values.
var mpiDifferences = []string{
	"spec.failurePolicy",
	"spec.network.enableDNSHostnames",
	"spec.network.subdomain",
	"spec.replicatedJobs[launcher].dependsOn",
	"spec.replicatedJobs[launcher].template.spec.completionMode",
	"spec.replicatedJobs[launcher].template.spec.template.metadata.labels",
	"spec.replicatedJobs[launcher].template.spec.template.spec.containers[node].env[OMPI_MCA_btl_vader_single_copy_mechanism]",
	"spec.replicatedJobs[launcher].template.spec.template.spec.containers[node].env[OMPI_MCA_mca_base_env_list]",
	"spec.replicatedJobs[launcher].template.spec.template.spec.containers[node].env[OMPI_MCA_plm_rsh_args].value",
	"spec.replicatedJobs[launcher].template.spec.template.spec.containers[node].terminationMessagePolicy",
	"spec.replicatedJobs[launcher].template.spec.template.spec.containers[node].volumeMounts[mpi-hostfile].readOnly",
	"spec.replicatedJobs[launcher].template.spec.template.spec.containers[node].volumeMounts[mpi-ssh-auth]",
	"spec.replicatedJobs[launcher].template.spec.template.spec.containers[node].volumeMounts[mpi-ssh]",
	"spec.replicatedJobs[launcher].template.spec.template.spec.initContainers",
	"spec.replicatedJobs[launcher].template.spec.template.spec.volumes[mpi-hostfile].configMap",
	"spec.replicatedJobs[launcher].template.spec.template.spec.volumes[mpi-hostfile].secret",
	"spec.replicatedJobs[launcher].template.spec.template.spec.volumes[mpi-pod-info]",
	"spec.replicatedJobs[launcher].template.spec.template.spec.volumes[mpi-ssh-auth]",
	"spec.replicatedJobs[launcher].template.spec.template.spec.volumes[mpi-ssh-secret]",
	"spec.replicatedJobs[launcher].template.spec.template.spec.volumes[mpi-ssh]",
	"spec.replicatedJobs[node].template.spec.backoffLimit",
	"spec.replicatedJobs[node].template.spec.completionMode",
	"spec.replicatedJobs[node].template.spec.template.metadata.labels",
	"spec.replicatedJobs[node].template.spec.template.spec.containers[node].terminationMessagePolicy",
	"spec.replicatedJobs[node].template.spec.template.spec.containers[node].volumeMounts[mpi-ssh-auth]",
	"spec.replicatedJobs[node].template.spec.template.spec.containers[node].volumeMounts[mpi-ssh]",
	"spec.replicatedJobs[node].template.spec.template.spec.initContainers",
	"spec.replicatedJobs[node].template.spec.template.spec.volumes[mpi-ssh-auth]",
	"spec.replicatedJobs[node].template.spec.template.spec.volumes[mpi-ssh-secret]",
	"spec.replicatedJobs[node].template.spec.template.spec.volumes[mpi-ssh]",
}

// envPatchJob patches the env of the node container, which upstream
// refuses: the TrainJob's spec.trainer.env sets it.
func envPatchJob(ns string) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "env-patch", Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "deepspeed-distributed"},
			RuntimePatches: []trainer.RuntimePatch{{Manager: "example.com/team", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
				Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						Containers: []trainer.ContainerPatch{{Name: "node", Env: []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}}}},
					}}}},
				}}}},
			}}},
		},
	}
}

// startUpstream runs upstream's trainer-controller-manager with its
// shipped Configuration, its webhooks served where the API server's webhook
// configurations point, and returns how to stop it.
func startUpstream() func() {
	GinkgoHelper()
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "trainer-controller-manager")
	Expect(bin).To(BeAnExistingFile(), "run hack/testbin/build.sh trainer (make test-integration does)")
	dir := GinkgoT().TempDir()
	ports, err := supervisor.NewPorts()
	Expect(err).NotTo(HaveOccurred())
	p, err := ports.TakeN(3)
	Expect(err).NotTo(HaveOccurred())
	_, webhookPort, certDir := fw.WebhookServing()
	config := filepath.Join(dir, "config.yaml")
	Expect(upstreamtrainer.WriteConfig(upstreamtrainer.ShippedConfig(framework.ModuleDir(upstreamtrainer.Module)), config, upstreamtrainer.Options{
		HealthPort: p[0], MetricsPort: p[1], WebhookPort: webhookPort, StatusServerPort: p[2],
	})).To(Succeed())
	// Upstream reads its serving certificate from controller-runtime's
	// default directory under $TMPDIR.
	serving := filepath.Join(dir, "tmp", "k8s-webhook-server", "serving-certs")
	Expect(os.MkdirAll(serving, 0o700)).To(Succeed())
	for _, f := range []string{"tls.crt", "tls.key"} {
		data, err := os.ReadFile(filepath.Join(certDir, f))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(serving, f), data, 0o600)).To(Succeed())
	}
	proc, err := supervisor.Start(supervisor.Spec{
		Name: "trainer-controller-manager",
		Argv: []string{bin, "--config=" + config},
		Env:  []string{"KUBECONFIG=" + fw.WriteKubeconfig(dir), "TMPDIR=" + filepath.Join(dir, "tmp")},
		Log:  filepath.Join(dir, "trainer-controller-manager.log"),
	})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error {
		if proc.Exited() {
			return StopTrying(fmt.Sprintf("upstream's controller exited: %v\n%s", proc.ExitError(), supervisor.Tail(proc.Log, 30)))
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", p[0]))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}, framework.Timeout, framework.Interval).Should(Succeed())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			proc.Stop()
			AddReportEntry("upstream's controller log", supervisor.Tail(proc.Log, 40))
		})
	}
	DeferCleanup(stop)
	return stop
}

// createRuntimes creates upstream's own ClusterTrainingRuntimes as its
// manifests publish them, and a plain one (no framework policy) made from
// the torch runtime.
func createRuntimes(sctx SpecContext) {
	GinkgoHelper()
	dir := filepath.Join(framework.ModuleDir(upstreamtrainer.Module), "manifests", "base", "runtimes")
	for _, f := range []string{"torch_distributed.yaml", "jax_distributed.yaml", "xgboost_distributed.yaml", "deepspeed_distributed.yaml"} {
		for _, o := range framework.ReadObjects(filepath.Join(dir, f)) {
			if o.GetName() == "torch-distributed" {
				plain := o.DeepCopy()
				plain.SetName("plain")
				plain.SetLabels(nil)
				unstructured.RemoveNestedField(plain.Object, "spec", "mlPolicy", "torch")
				framework.AwaitAdmitted(sctx, fw.Client, plain)
				Expect(fw.Client.Create(sctx, plain)).To(Succeed())
			}
			if o.GetName() == "deepspeed-distributed" {
				sidecar := withSidecar(o.DeepCopy())
				framework.AwaitAdmitted(sctx, fw.Client, sidecar)
				Expect(fw.Client.Create(sctx, sidecar)).To(Succeed())
			}
			framework.AwaitAdmitted(sctx, fw.Client, o)
			Expect(fw.Client.Create(sctx, o)).To(Succeed(), "creating %s from %s", o.GetName(), f)
		}
	}
}

// withSidecar makes sidecarRuntime of a runtime: a sidecar container
// beside its workers' MPI container.
func withSidecar(rt *unstructured.Unstructured) *unstructured.Unstructured {
	GinkgoHelper()
	rt.SetName(sidecarRuntime)
	jobs, _, err := unstructured.NestedSlice(rt.Object, "spec", "template", "spec", "replicatedJobs")
	Expect(err).NotTo(HaveOccurred())
	for _, j := range jobs {
		rj := j.(map[string]any)
		if rj["name"] != "node" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(rj, "template", "spec", "template", "spec", "containers")
		Expect(err).NotTo(HaveOccurred())
		containers = append(containers, map[string]any{"name": "sidecar", "image": "registry.example.com/sidecar:1"})
		Expect(unstructured.SetNestedSlice(rj, containers, "template", "spec", "template", "spec", "containers")).To(Succeed())
	}
	Expect(unstructured.SetNestedSlice(rt.Object, jobs, "spec", "template", "spec", "replicatedJobs")).To(Succeed())
	return rt
}

// runJobs creates every job in ns, waits for its JobSet, writes the
// JobSet's end, and returns what the running controller made of each.
func runJobs(sctx SpecContext, ns string) map[string]outcome {
	GinkgoHelper()
	for _, j := range jobs {
		tj := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: j.name, Namespace: ns},
			Spec: trainer.TrainJobSpec{
				RuntimeRef:     trainer.RuntimeRef{Name: j.runtime},
				Suspend:        ptr.To(j.suspend),
				RuntimePatches: j.patches,
				Trainer: &trainer.Trainer{
					NumNodes: ptr.To(j.numNodes),
					Command:  []string{"python3", "train.py"},
					Env:      []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}},
					ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
					}},
				},
			},
		}
		framework.AwaitAdmitted(sctx, fw.Client, tj)
		Expect(fw.Client.Create(sctx, tj)).To(Succeed(), "creating TrainJob %s", j.name)
	}
	out := map[string]outcome{}
	for _, j := range jobs {
		key := client.ObjectKey{Namespace: ns, Name: j.name}
		var js jobsetv1alpha2.JobSet
		Eventually(func() error { return fw.Client.Get(sctx, key, &js) }, framework.Timeout, framework.Interval).
			Should(Succeed(), "JobSet of %s", j.name)
		// The hostfile while the job runs: Torus's goes with its keys
		// when the job ends.
		var hostfile map[string]string
		if j.mpi {
			Eventually(func(g Gomega) { hostfile = mountedHostfile(sctx, g, &js) }, framework.Timeout, framework.Interval).Should(Succeed())
		}
		if j.end != "" {
			endJobSet(sctx, &js, j.end)
		}
		var tj trainer.TrainJob
		Eventually(func(g Gomega) {
			g.Expect(fw.Client.Get(sctx, key, &tj)).To(Succeed())
			switch {
			case j.end != "":
				g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainjobCondition(j.end))).To(BeTrue(), "%v", tj.Status.Conditions)
			case j.suspend:
				g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended)).To(BeTrue(), "%v", tj.Status.Conditions)
			}
		}, framework.Timeout, framework.Interval).Should(Succeed(), "status of %s", j.name)
		Expect(fw.Client.Get(sctx, key, &js)).To(Succeed())
		o := outcome{jobSet: js.DeepCopy(), conditions: tj.Status.Conditions, jobsStatus: tj.Status.JobsStatus, hostfile: hostfile}
		var snapshot corev1.ConfigMap
		if err := fw.Client.Get(sctx, client.ObjectKey{Namespace: ns, Name: j.name + "-runtime-snapshot"}, &snapshot); err == nil {
			o.snapshot = &snapshot
		} else if !j.mpi {
			Fail(fmt.Sprintf("no runtime snapshot for %s: %v", j.name, err))
		}
		out[j.name] = o
	}
	return out
}

// mountedHostfile reads the data of the object a JobSet's launcher mounts
// as its mpi-hostfile volume.
func mountedHostfile(sctx SpecContext, g Gomega, js *jobsetv1alpha2.JobSet) map[string]string {
	for _, rj := range js.Spec.ReplicatedJobs {
		for _, v := range rj.Template.Spec.Template.Spec.Volumes {
			if v.Name != "mpi-hostfile" {
				continue
			}
			key := client.ObjectKey{Namespace: js.Namespace}
			switch {
			case v.ConfigMap != nil:
				var cm corev1.ConfigMap
				key.Name = v.ConfigMap.Name
				g.Expect(fw.Client.Get(sctx, key, &cm)).To(Succeed())
				return cm.Data
			case v.Secret != nil:
				var s corev1.Secret
				key.Name = v.Secret.SecretName
				g.Expect(fw.Client.Get(sctx, key, &s)).To(Succeed())
				out := map[string]string{}
				for _, item := range v.Secret.Items {
					out[item.Path] = string(s.Data[item.Key])
				}
				return out
			}
		}
	}
	StopTrying("JobSet " + js.Name + " mounts no mpi-hostfile volume").Now()
	return nil
}

func lines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func trainjobCondition(end jobsetv1alpha2.JobSetConditionType) string {
	if end == jobsetv1alpha2.JobSetFailed {
		return trainer.TrainJobFailed
	}
	return trainer.TrainJobComplete
}

// endJobSet writes the status the JobSet controller writes when a JobSet
// ends, the same in both runs.
func endJobSet(sctx SpecContext, js *jobsetv1alpha2.JobSet, end jobsetv1alpha2.JobSetConditionType) {
	GinkgoHelper()
	cond := metav1.Condition{Type: string(end), Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now(),
		Reason: "AllJobsCompleted", Message: "jobset completed successfully"}
	if end == jobsetv1alpha2.JobSetFailed {
		cond.Reason, cond.Message = "FailedJobs", "jobset failed due to one or more job failures"
	}
	js.Status.Conditions = append(js.Status.Conditions, cond)
	js.Status.TerminalState = string(end)
	for _, rj := range js.Spec.ReplicatedJobs {
		s := jobsetv1alpha2.ReplicatedJobStatus{Name: rj.Name}
		if end == jobsetv1alpha2.JobSetFailed {
			s.Failed = 1
		} else {
			s.Succeeded = rj.Replicas
		}
		js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, s)
	}
	Expect(fw.Client.Status().Update(sctx, js)).To(Succeed())
}

type owner struct {
	Kind, Name                   string
	Controller, BlockOwnerDelete bool
}

func owners(o metav1.Object) []owner {
	var out []owner
	for _, r := range o.GetOwnerReferences() {
		out = append(out, owner{r.Kind, r.Name, ptr.Deref(r.Controller, false), ptr.Deref(r.BlockOwnerDeletion, false)})
	}
	return out
}

// comparable drops what differs between two runs by nature: the time of a
// transition.
func comparable(conds []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds))
	for _, c := range conds {
		c.LastTransitionTime = metav1.Time{}
		out = append(out, c)
	}
	return out
}

// differences lists the paths at which two JobSets' specs differ, list
// elements named by their name field where they have one.
func differences(a, b *jobsetv1alpha2.JobSet) []string {
	GinkgoHelper()
	var out []string
	walk("spec", tree(a.Spec), tree(b.Spec), &out)
	sort.Strings(out)
	return out
}

func tree(v any) any {
	GinkgoHelper()
	data, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	var t any
	Expect(json.Unmarshal(data, &t)).To(Succeed())
	return t
}

func walk(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for _, k := range union(am, bm) {
			walk(path+"."+k, am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && named(al) && named(bl) {
		byName := func(l []any) map[string]any {
			m := map[string]any{}
			for _, e := range l {
				m[e.(map[string]any)["name"].(string)] = e
			}
			return m
		}
		an, bn := byName(al), byName(bl)
		for _, k := range union(an, bn) {
			walk(fmt.Sprintf("%s[%s]", path, k), an[k], bn[k], out)
		}
		return
	}
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	if string(aj) != string(bj) {
		*out = append(*out, path)
		GinkgoWriter.Printf("%s\n  upstream: %s\n  torus:    %s\n", path, aj, bj)
	}
}

// union is the keys of both maps, sorted.
func union(a, b map[string]any) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func named(l []any) bool {
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return len(l) > 0
}
