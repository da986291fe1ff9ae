package webhook

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// disposition is what Torus does with a field of an MPI TrainJob or of an
// MPI runtime.
type disposition int

const (
	// inJobSet: the field shapes the JobSet (the test sees it change).
	inJobSet disposition = iota
	// byController: the controller acts on it (named in why).
	byController
	// refused: the webhook refuses an MPI object that sets it, naming it.
	refused
)

// fieldCase sets one field on a valid MPI TrainJob and its runtime.
type fieldCase struct {
	does disposition
	why  string
	set  func(tj *trainer.TrainJob, rt *mpi.Runtime)
}

// patchPod gives a job a runtime patch of the node job's pods, set by f.
func patchPod(f func(*trainer.PodSpecPatch)) func(*trainer.TrainJob, *mpi.Runtime) {
	return func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		ps := &trainer.PodSpecPatch{}
		f(ps)
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/scheduler", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: mpi.NodeJob, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: ps}}},
			}}}},
		}}}
	}
}

// patchContainer gives a job a runtime patch of a container of the node
// job's pods: the MPI container, or a sidecar or init container the setter
// adds to the runtime.
func patchContainer(kind string, f func(*trainer.ContainerPatch)) func(*trainer.TrainJob, *mpi.Runtime) {
	return func(tj *trainer.TrainJob, rt *mpi.Runtime) {
		name := mpi.TrainerContainer
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
			if rj.Name != mpi.NodeJob {
				continue
			}
			ps := &rj.Template.Spec.Template.Spec
			switch kind {
			case "init":
				name = "fetch"
				ps.InitContainers = append(ps.InitContainers, corev1.Container{Name: name, Image: "example.com/fetch:1"})
			case "sidecar":
				name = "sidecar"
				ps.Containers = append(ps.Containers, corev1.Container{Name: name, Image: "example.com/sidecar:1"})
			}
		}
		patchPod(func(ps *trainer.PodSpecPatch) {
			c := trainer.ContainerPatch{Name: name}
			f(&c)
			if kind == "init" {
				ps.InitContainers = []trainer.ContainerPatch{c}
			} else {
				ps.Containers = []trainer.ContainerPatch{c}
			}
		})(tj, rt)
	}
}

var labels = map[string]string{"example.com/team": "hpc"}

// fields is every field of TrainJobSpec and TrainingRuntimeSpec, by JSON
// path, with what Torus does when an MPI job or runtime sets it.
var fields = map[string]fieldCase{
	"spec.runtimeRef.name":     {byController, "the runtime the job is built from", nil},
	"spec.runtimeRef.apiGroup": {byController, "the runtime the job is built from", nil},
	"spec.runtimeRef.kind":     {byController, "the runtime the job is built from (ClusterTrainingRuntime or TrainingRuntime)", nil},

	"spec.initializer.dataset.storageUri": {refused, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://data")}}
	}},
	"spec.initializer.dataset.env": {refused, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
	}},
	"spec.initializer.dataset.secretRef": {refused, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{SecretRef: &corev1.LocalObjectReference{Name: "s"}}}
	}},
	"spec.initializer.model.storageUri": {refused, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Initializer = &trainer.Initializer{Model: &trainer.ModelInitializer{StorageUri: ptr.To("hf://model")}}
	}},
	"spec.initializer.model.env": {refused, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Initializer = &trainer.Initializer{Model: &trainer.ModelInitializer{Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
	}},
	"spec.initializer.model.secretRef": {refused, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Initializer = &trainer.Initializer{Model: &trainer.ModelInitializer{SecretRef: &corev1.LocalObjectReference{Name: "s"}}}
	}},

	"spec.trainer.image":   {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) { tj.Spec.Trainer.Image = ptr.To("example.com/mpi:2") }},
	"spec.trainer.command": {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) { tj.Spec.Trainer.Command = []string{"mpirun", "-n", "2"} }},
	"spec.trainer.args":    {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) { tj.Spec.Trainer.Args = []string{"/opt/app"} }},
	"spec.trainer.env": {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}}
	}},
	"spec.trainer.numNodes": {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) { tj.Spec.Trainer.NumNodes = ptr.To[int32](5) }},
	"spec.trainer.resourcesPerNode": {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	}},
	// Slots per node reach the ranks through the hostfile, not the JobSet.
	"spec.trainer.numProcPerNode": {byController, "the hostfile's slots per host (mpi.Job.SlotsPerWorker, hostfile tests)", nil},

	"spec.runtimePatches.manager": {byController, "patches of every manager are applied, in order", nil},
	"spec.runtimePatches.time":    {byController, "upstream's defaulter stamps it; it orders nothing in Torus", nil},
	"spec.runtimePatches.trainingRuntimeSpec.template.metadata": {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/m", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Metadata: &metav1.ObjectMeta{Labels: labels}},
		}}}
	}},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.name": {refused, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/m", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "dataset-initializer"}}}},
		}}}
	}},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.metadata": {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/m", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: mpi.NodeJob, Template: &trainer.JobTemplatePatch{Metadata: &metav1.ObjectMeta{Annotations: labels}},
			}}}},
		}}}
	}},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.metadata": {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/m", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: mpi.NodeJob, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{Labels: labels}}}},
			}}}},
		}}}
	}},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.nodeSelector": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.NodeSelector = labels
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.tolerations": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.Tolerations = []corev1.Toleration{{Key: "example.com/hpc", Operator: corev1.TolerationOpExists}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.schedulingGates": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.serviceAccountName": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.ServiceAccountName = ptr.To("robot")
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.volumes": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.initContainers.name": {byController, "names the runtime's init container the patch's other fields change (refused when the runtime has none of that name)", nil},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.initContainers.env": {inJobSet, "", patchContainer("init", func(c *trainer.ContainerPatch) {
		c.Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.initContainers.volumeMounts": {inJobSet, "", patchContainer("init", func(c *trainer.ContainerPatch) {
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.initContainers.securityContext": {inJobSet, "", patchContainer("init", func(c *trainer.ContainerPatch) {
		c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.containers.name": {byController, "names the runtime's container the patch's other fields change (refused when the runtime has none of that name)", nil},
	// The MPI container's env is spec.trainer.env's (refused there, as
	// upstream refuses it: TestRuntimePatchRefusals); other containers'
	// is the patch's.
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.containers.env": {inJobSet, "", patchContainer("sidecar", func(c *trainer.ContainerPatch) {
		c.Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.containers.volumeMounts": {inJobSet, "", patchContainer("", func(c *trainer.ContainerPatch) {
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.containers.securityContext": {inJobSet, "", patchContainer("", func(c *trainer.ContainerPatch) {
		c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.imagePullSecrets": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.securityContext": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.affinity": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
		}}}
	})},
	"spec.runtimePatches.trainingRuntimeSpec.template.spec.replicatedJobs.template.spec.template.spec.terminationGracePeriodSeconds": {inJobSet, "", patchPod(func(ps *trainer.PodSpecPatch) {
		ps.TerminationGracePeriodSeconds = ptr.To[int64](5)
	})},

	"spec.suspend":               {inJobSet, "", func(tj *trainer.TrainJob, _ *mpi.Runtime) { tj.Spec.Suspend = ptr.To(true) }},
	"spec.activeDeadlineSeconds": {byController, "Failed with DeadlineExceeded and the JobSet deleted (controller integration tests)", nil},
	"spec.managedBy":             {byController, "jobs managed by another controller (MultiKueue) are left alone", nil},

	"runtime.spec.mlPolicy.numNodes": {inJobSet, "", func(tj *trainer.TrainJob, rt *mpi.Runtime) {
		tj.Spec.Trainer.NumNodes = nil
		rt.Spec.MLPolicy.NumNodes = ptr.To[int32](4)
	}},
	"runtime.spec.mlPolicy.torch.envInjection.targets.jobName": {refused, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.MLPolicy.Torch = &trainer.TorchMLPolicySource{EnvInjection: &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: mpi.NodeJob}}}}
	}},
	"runtime.spec.mlPolicy.torch.envInjection.targets.containerNames": {refused, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.MLPolicy.Torch = &trainer.TorchMLPolicySource{EnvInjection: &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{ContainerNames: []string{"node"}}}}}
	}},
	"runtime.spec.mlPolicy.mpi.numProcPerNode": {byController, "the hostfile's slots per host, as spec.trainer.numProcPerNode", nil},
	"runtime.spec.mlPolicy.mpi.mpiImplementation": {inJobSet, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.MLPolicy.MPI.MPIImplementation = ptr.To(trainer.MPIImplementationMPICH)
	}},
	"runtime.spec.mlPolicy.mpi.sshAuthMountPath": {inJobSet, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.MLPolicy.MPI.SSHAuthMountPath = ptr.To("/home/someone/.ssh")
	}},
	"runtime.spec.mlPolicy.mpi.runLauncherAsNode": {inJobSet, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.MLPolicy.MPI.RunLauncherAsNode = ptr.To(true)
	}},
	"runtime.spec.mlPolicy.flux.numProcPerNode": {refused, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.MLPolicy.Flux = &trainer.FluxMLPolicySource{NumProcPerNode: ptr.To[int32](2)}
	}},
	"runtime.spec.podGroupPolicy.coscheduling.scheduleTimeoutSeconds": {refused, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
			Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](60)}}}
	}},
	"runtime.spec.podGroupPolicy.volcano.networkTopology": {refused, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{Volcano: &trainer.VolcanoPodGroupPolicySource{}}}
	}},
	"runtime.spec.template.metadata": {inJobSet, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.Template.Labels = labels
	}},
	"runtime.spec.template.spec": {inJobSet, "", func(_ *trainer.TrainJob, rt *mpi.Runtime) {
		rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.PriorityClassName = "high"
	}},
}

// apiFields lists the JSON paths of a type's fields down to the first type
// outside the Trainer API (Kubernetes' own types are taken whole).
func apiFields(prefix string, t reflect.Type, out *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[trainer.TrainJob]().PkgPath() {
		*out = append(*out, prefix)
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := prefix
		if name != "" {
			p += "." + name
		}
		apiFields(p, f.Type, out)
	}
}

// sampleRuntime is the shipped Open MPI runtime.
func sampleRuntime(tb testing.TB) trainer.ClusterTrainingRuntime {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "samples", "runtimes", "torus-openmpi.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var ctr trainer.ClusterTrainingRuntime
	if err := yaml.Unmarshal(data, &ctr); err != nil {
		tb.Fatal(err)
	}
	return ctr
}

func baseline(t *testing.T) (*trainer.TrainJob, *mpi.Runtime) {
	t.Helper()
	ctr := sampleRuntime(t)
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: ctr.Name},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
		},
	}
	return tj, &mpi.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: ctr.Name, Annotations: ctr.Annotations, Spec: ctr.Spec}
}

func buildJobSet(t *testing.T, tj *trainer.TrainJob, rt *mpi.Runtime) *jobsetv1alpha2.JobSet {
	t.Helper()
	job, err := mpi.ResolveJob(tj, rt)
	if err != nil {
		t.Fatal(err)
	}
	js, err := children.BuildJobSet(tj, rt, job, children.BuildOptions{ClusterDomain: mpi.DefaultClusterDomain, LaunchImage: "registry.example/torus-operator:test"})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestEveryFieldIsHonouredOrRefused: no field of an MPI TrainJob or of its
// runtime is accepted and then ignored. Each is either seen to shape the
// JobSet, acted on by the controller, or refused by the webhook with its
// name in the message. A field the Trainer API gains fails this test until
// it is given one of those.
func TestEveryFieldIsHonouredOrRefused(t *testing.T) {
	var paths []string
	apiFields("spec", reflect.TypeFor[trainer.TrainJobSpec](), &paths)
	apiFields("runtime.spec", reflect.TypeFor[trainer.TrainingRuntimeSpec](), &paths)
	for _, p := range paths {
		if _, ok := fields[p]; !ok {
			t.Errorf("%s: neither honoured nor refused for MPI jobs; add it to fields (and make it one or the other)", p)
		}
	}
	for p := range fields {
		if !slices.Contains(paths, p) {
			t.Errorf("%s is in fields but not in the API", p)
		}
	}

	baseTJ, baseRT := baseline(t)
	if errs := validateTrainJob(baseTJ, baseRT, mpi.DefaultMaxNodes); len(errs) > 0 {
		t.Fatalf("the baseline job is refused: %v", errs)
	}
	base := buildJobSet(t, baseTJ, baseRT)
	for p, c := range fields {
		t.Run(p, func(t *testing.T) {
			if c.set == nil {
				if c.does != byController || c.why == "" {
					t.Fatal("a field without a setter must be the controller's, with why")
				}
				return
			}
			tj, rt := baseline(t)
			c.set(tj, rt)
			errs := validateTrainJob(tj, rt, mpi.DefaultMaxNodes)
			switch c.does {
			case refused:
				if len(errs) == 0 {
					t.Fatalf("an MPI job setting %s is admitted", p)
				}
				if !names(errs.ToAggregate().Error(), p) {
					t.Errorf("the refusal does not name %s or what holds it: %v", p, errs)
				}
			case inJobSet:
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if equality.Semantic.DeepEqual(buildJobSet(t, tj, rt), base) {
					t.Errorf("setting %s changes nothing in the JobSet", p)
				}
			}
		})
	}
}

// names reports whether a refusal names a field, or an object holding it
// (spec.initializer for its dataset's env): any element of its path but
// the generic ones.
func names(msg, path string) bool {
	for _, e := range strings.Split(path, ".") {
		switch e {
		case "runtime", "spec", "template", "metadata", "mlPolicy", "trainingRuntimeSpec", "replicatedJobs":
			continue
		}
		if strings.Contains(msg, "."+e) {
			return true
		}
	}
	return false
}

// A runtime patch, which anyone who may update the TrainJob can write, may
// not move pods into another job.
func TestRuntimePatchesMayNotSetTorusMetadata(t *testing.T) {
	for name, m := range map[string]*metav1.ObjectMeta{
		"job label":        {Labels: map[string]string{api.LabelJobName: "other"}},
		"role label":       {Labels: map[string]string{api.LabelRole: api.RoleLauncher}},
		"Torus annotation": {Annotations: map[string]string{api.AnnotationKeepSSHKeys: "true"}},
	} {
		t.Run(name, func(t *testing.T) {
			tj, rt := baseline(t)
			patchPod(func(*trainer.PodSpecPatch) {})(tj, rt)
			tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Metadata = m
			errs := validateTrainJob(tj, rt, mpi.DefaultMaxNodes)
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "keys under torus-mpi.io/ are Torus's") {
				t.Errorf("a patch of %v is admitted: %v", m, errs)
			}
		})
	}
	tj, rt := baseline(t)
	patchPod(func(*trainer.PodSpecPatch) {})(tj, rt)
	tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Metadata = &metav1.ObjectMeta{Labels: map[string]string{"kueue.x-k8s.io/podset": "node"}}
	if errs := validateTrainJob(tj, rt, mpi.DefaultMaxNodes); len(errs) > 0 {
		t.Errorf("Kueue's own labels are refused: %v", errs)
	}
}
