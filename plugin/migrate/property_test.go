package migrate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// propertyRuns is how many random MPIJobs TestPropertyRandomMPIJobs converts.
const propertyRuns = 2000

// randomMPIJob builds a valid MPIJob from a random source: any size, MPI
// implementation, SSH path, images, commands, resources, environment,
// volumes, policies and queue.
func randomMPIJob(r *rand.Rand) *kubeflow.MPIJob {
	pick := func(options ...string) string { return options[r.IntN(len(options))] }
	const letters = "abcdefghijklmnopqrstuvwxyz"
	name := string(letters[r.IntN(26)])
	for n := r.IntN(40); n > 0; n-- {
		name += string("abcdefghijklmnopqrstuvwxyz0123456789-"[r.IntN(37)])
	}
	name += string(letters[r.IntN(26)])

	resources := func() corev1.ResourceRequirements {
		var rr corev1.ResourceRequirements
		if r.IntN(4) == 0 {
			return rr
		}
		rr.Limits = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(1+r.IntN(64)), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(1+r.IntN(256))<<30, resource.BinarySI),
		}
		if r.IntN(2) == 0 {
			rr.Limits["nvidia.com/gpu"] = *resource.NewQuantity(int64(1+r.IntN(8)), resource.DecimalSI)
		}
		if r.IntN(2) == 0 {
			rr.Requests = corev1.ResourceList{corev1.ResourceCPU: rr.Limits[corev1.ResourceCPU]}
		}
		return rr
	}
	env := func() []corev1.EnvVar {
		var e []corev1.EnvVar
		for i := r.IntN(3); i > 0; i-- {
			e = append(e, corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", r.IntN(100)), Value: pick("1", "x", "")})
		}
		return e
	}
	image := fmt.Sprintf("registry.example.com/%s:%d", pick("pi", "horovod", "nccl"), r.IntN(10))
	workerImage := image
	if r.IntN(5) == 0 {
		workerImage += "-worker"
	}
	sshPath := pick("", "/root/.ssh", "/home/mpiuser/.ssh", "/home/user/.ssh")
	launcher := corev1.Container{
		Name:      pick("launcher", "mpi-launcher", "main"),
		Image:     image,
		Resources: resources(),
		Env:       env(),
	}
	switch r.IntN(3) {
	case 0:
		launcher.Command = []string{"mpirun", "-n", fmt.Sprint(r.IntN(100)), "python", "train.py"}
	case 1:
		launcher.Command = []string{"mpirun"}
		launcher.Args = []string{"--allow-run-as-root", "-np", "4", "./app"}
	default:
		launcher.Args = []string{"mpiexec", "-n", "2", "./app"}
	}
	worker := corev1.Container{Name: pick("worker", "mpi-worker"), Image: workerImage, Resources: resources()}
	if r.IntN(2) == 0 {
		worker.Env = slices.Clone(launcher.Env)
	}
	switch r.IntN(3) {
	case 1:
		worker.Command = []string{"/usr/sbin/sshd"}
		worker.Args = []string{"-De", "-f", pick("/home/mpiuser/.sshd_config", "/etc/ssh/sshd_config")}
	case 2:
		worker.Args = []string{"/usr/sbin/sshd", "-De"}
	}
	podSpec := func(c corev1.Container) corev1.PodTemplateSpec {
		pt := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
		if r.IntN(3) == 0 {
			pt.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			pt.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
		if r.IntN(3) == 0 {
			pt.Spec.NodeSelector = map[string]string{"pool": pick("a", "b")}
		}
		if r.IntN(3) == 0 {
			pt.Annotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "ib"}
		}
		if r.IntN(2) == 0 {
			pt.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
		}
		return pt
	}
	job := &kubeflow.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: MPIJobAPIVersion, Kind: kubeflow.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pick("", "default", "team-a")},
		Spec: kubeflow.MPIJobSpec{
			SlotsPerWorker:      ptr.To(int32(1 + r.IntN(16))),
			RunLauncherAsWorker: ptr.To(r.IntN(4) == 0),
			SSHAuthMountPath:    sshPath,
			MPIImplementation:   kubeflow.MPIImplementation(pick("", "OpenMPI", "Intel", "MPICH")),
			MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: podSpec(launcher),
					RestartPolicy: kubeflow.RestartPolicy(pick("", "Never", "OnFailure"))},
				kubeflow.MPIReplicaTypeWorker: {Replicas: ptr.To(int32(1 + r.IntN(512))), Template: podSpec(worker),
					RestartPolicy: kubeflow.RestartPolicy(pick("", "Never", "OnFailure"))},
			},
			LauncherCreationPolicy: kubeflow.LauncherCreationPolicy(pick("", "AtStartup", "WaitForWorkersReady")),
		},
	}
	rp := &job.Spec.RunPolicy
	if p := pick("", "None", "Running", "All"); p != "" {
		rp.CleanPodPolicy = ptr.To(kubeflow.CleanPodPolicy(p))
	}
	if r.IntN(3) == 0 {
		rp.BackoffLimit = ptr.To(int32(r.IntN(10)))
	}
	if r.IntN(3) == 0 {
		rp.TTLSecondsAfterFinished = ptr.To(int32(r.IntN(1000)))
	}
	if r.IntN(3) == 0 {
		rp.ActiveDeadlineSeconds = ptr.To(int64(1 + r.IntN(100000)))
	}
	if r.IntN(4) == 0 {
		rp.Suspend = ptr.To(r.IntN(2) == 0)
	}
	switch r.IntN(3) {
	case 0:
		job.Labels = map[string]string{kueueconstants.QueueLabel: "lq-" + pick("a", "b")}
	case 1:
		rp.SchedulingPolicy = &kubeflow.SchedulingPolicy{Queue: "vq-" + pick("a", "b"), PriorityClass: pick("", "high")}
	}
	if r.IntN(4) == 0 {
		shapeLikeSamples(job)
	}
	return job
}

// shapeLikeSamples makes a job that the shipped runtimes express: the
// samples' SSH path and user, one image and environment, no launcher
// resources, no extra pod settings or policies.
func shapeLikeSamples(job *kubeflow.MPIJob) {
	job.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh"
	job.Spec.RunLauncherAsWorker = ptr.To(false)
	job.Spec.RunPolicy.TTLSecondsAfterFinished = nil
	job.Spec.RunPolicy.BackoffLimit = nil
	l, w := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher], job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
	l.RestartPolicy, w.RestartPolicy = "", ""
	for _, pt := range []*corev1.PodTemplateSpec{&l.Template, &w.Template} {
		pt.Annotations = nil
		pt.Spec.Volumes, pt.Spec.NodeSelector = nil, nil
		c := &pt.Spec.Containers[0]
		c.VolumeMounts = nil
		c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
		c.Image = l.Template.Spec.Containers[0].Image
		c.Env = l.Template.Spec.Containers[0].Env
	}
	l.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
}

// effective is what Torus runs in one replicated job's node container:
// the runtime's (generated, or the shipped one the TrainJob refers to) with
// the TrainJob's fields applied as the operator applies them.
func effective(t *testing.T, res *Result, job string, runsRanks bool) corev1.Container {
	t.Helper()
	var rt *trainer.TrainingRuntimeSpec
	if res.Runtime != nil {
		rt = &res.Runtime.Spec
	} else {
		shippedRT, err := shippedRuntimeNamed(res.TrainJob.Spec.RuntimeRef.Name)
		if err != nil {
			t.Fatal(err)
		}
		rt = &shippedRT.Spec
	}
	rj := findReplicatedJob(rt.Template.Spec.ReplicatedJobs, job)
	if rj == nil {
		t.Fatalf("runtime has no %s job", job)
	}
	c := *mainContainer(&rj.Template.Spec.Template.Spec).DeepCopy()
	tr := res.TrainJob.Spec.Trainer
	if tr.Image != nil {
		c.Image = *tr.Image
	}
	if job == mpi.LauncherJob && tr.Command != nil {
		c.Command = tr.Command
	}
	if job == mpi.LauncherJob && tr.Args != nil {
		c.Args = tr.Args
	}
	if runsRanks && tr.ResourcesPerNode != nil {
		c.Resources = *tr.ResourcesPerNode
	}
	return c
}

// TestPropertyRandomMPIJobs converts random valid MPIJobs (fixed seed) and
// checks that workers, slots, images, commands, resources and the queue
// survive as Torus will run them, and that the output decodes strictly.
func TestPropertyRandomMPIJobs(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 5))
	reused := 0
	for i := range propertyRuns {
		in := randomMPIJob(r)
		mode := RuntimeModes[r.IntN(len(RuntimeModes))]
		res := convertJob(in, Options{RuntimeMode: mode})
		if err := res.Err(); err != nil {
			t.Fatalf("run %d: Convert(%s) failed: %v", i, in.Name, err)
		}
		if res.Runtime == nil {
			reused++
		}
		specs := in.Spec.MPIReplicaSpecs
		l, w := specs[kubeflow.MPIReplicaTypeLauncher].Template.Spec.Containers[0], specs[kubeflow.MPIReplicaTypeWorker].Template.Spec.Containers[0]
		launcherRuns := *in.Spec.RunLauncherAsWorker

		// Sizes, as the operator resolves them.
		rt := &mpi.Runtime{Kind: trainer.TrainingRuntimeKind, Name: in.Name}
		if res.Runtime != nil {
			rt.Spec = res.Runtime.Spec
		} else {
			s, err := shippedRuntimeNamed(res.TrainJob.Spec.RuntimeRef.Name)
			if err != nil {
				t.Fatal(err)
			}
			rt.Kind, rt.Spec, rt.Annotations = trainer.ClusterTrainingRuntimeKind, s.Spec, s.Annotations
		}
		resolved, err := mpi.ResolveJob(res.TrainJob, rt)
		if err != nil {
			t.Fatalf("run %d: ResolveJob: %v", i, err)
		}
		el, ew := effective(t, res, mpi.LauncherJob, launcherRuns), effective(t, res, mpi.NodeJob, true)
		queue := in.Labels[kueueconstants.QueueLabel]
		if queue == "" && in.Spec.RunPolicy.SchedulingPolicy != nil {
			queue = in.Spec.RunPolicy.SchedulingPolicy.Queue
		}
		got := []any{
			resolved.Workers, resolved.SlotsPerHost, resolved.LauncherRunsRanks, string(resolved.Implementation),
			el.Image, ew.Image, append(slices.Clone(el.Command), el.Args...),
			equality.Semantic.DeepEqual(el.Resources, l.Resources), equality.Semantic.DeepEqual(ew.Resources, w.Resources),
			res.TrainJob.Labels[kueueconstants.QueueLabel],
		}
		impl := string(in.Spec.MPIImplementation)
		if impl == "" {
			impl = "OpenMPI"
		}
		want := []any{
			*specs[kubeflow.MPIReplicaTypeWorker].Replicas, *in.Spec.SlotsPerWorker, launcherRuns, impl,
			l.Image, w.Image, append(slices.Clone(l.Command), l.Args...),
			true, true,
			queue,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("run %d: %s (%s) (-want,+got):\n%s\nfindings:\n%s", i, in.Name, mode, diff, findingsText(res.Findings))
		}

		// What is written decodes strictly as Trainer objects.
		var buf bytes.Buffer
		if err := writeYAML(&buf, []*Item{{Result: res, Kind: kubeflow.Kind}}); err != nil {
			t.Fatalf("run %d: WriteYAML: %v", i, err)
		}
		docs := bytes.Split(buf.Bytes(), []byte("---\n"))
		var tj trainer.TrainJob
		if err := yaml.UnmarshalStrict(docs[len(docs)-1], &tj); err != nil {
			t.Fatalf("run %d: the TrainJob does not decode strictly: %v\n%s", i, err, buf.String())
		}
		if res.Runtime != nil {
			var tr trainer.TrainingRuntime
			if err := yaml.UnmarshalStrict(docs[0], &tr); err != nil {
				t.Fatalf("run %d: the runtime does not decode strictly: %v", i, err)
			}
		}
	}
	t.Logf("%d random MPIJobs converted, %d onto a shipped runtime", propertyRuns, reused)
	if reused == 0 || reused == propertyRuns {
		t.Errorf("%d of %d jobs reused a shipped runtime: the generator should exercise both", reused, propertyRuns)
	}
}
