package migrate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// baseJob is a small valid MPIJob: Open MPI, two root workers with no
// command, one slot each.
func baseJob() *kubeflow.MPIJob {
	return &kubeflow.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: MPIJobAPIVersion, Kind: kubeflow.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec: kubeflow.MPIJobSpec{
			SlotsPerWorker: ptr.To[int32](1),
			MPIReplicaSpecs: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {
					Replicas: ptr.To[int32](1),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "launcher", Image: "app:1", Command: []string{"mpirun"}, Args: []string{"./app"},
					}}}},
				},
				kubeflow.MPIReplicaTypeWorker: {
					Replicas: ptr.To[int32](2),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "worker", Image: "app:1",
					}}}},
				},
			},
		},
	}
}

func launcherOf(j *kubeflow.MPIJob) *corev1.PodTemplateSpec {
	return &j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template
}

func workerOf(j *kubeflow.MPIJob) *corev1.PodTemplateSpec {
	return &j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Template
}

func replicatedJob(t *testing.T, r *Result, name string) *jobsetv1alpha2.ReplicatedJob {
	t.Helper()
	if r.Runtime == nil {
		t.Fatalf("no runtime generated; findings:\n%s", findingsText(r.Findings))
	}
	rj := findReplicatedJob(r.Runtime.Spec.Template.Spec.ReplicatedJobs, name)
	if rj == nil {
		t.Fatalf("runtime has no replicated job %q", name)
	}
	return rj
}

func findingsText(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

// levels maps each field that has a finding to its highest level.
func levels(fs []Finding) map[string]Level {
	m := map[string]Level{}
	for _, f := range fs {
		if l, ok := m[f.Field]; !ok || f.Level > l {
			m[f.Field] = f.Level
		}
	}
	return m
}

func TestConvertMappings(t *testing.T) {
	worker := func(t *testing.T, r *Result) *corev1.PodTemplateSpec {
		return &replicatedJob(t, r, mpi.NodeJob).Template.Spec.Template
	}
	launcher := func(t *testing.T, r *Result) *corev1.PodTemplateSpec {
		return &replicatedJob(t, r, mpi.LauncherJob).Template.Spec.Template
	}
	cases := []struct {
		name   string
		mutate func(*kubeflow.MPIJob)
		opts   Options
		// got extracts what the case is about; want is its expected value.
		got  func(*testing.T, *Result) any
		want any
		// wantLevels are findings the case must produce, by field.
		wantLevels map[string]Level
	}{
		{
			name: "slotsPerWorker and Worker.replicas become numProcPerNode and numNodes",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.SlotsPerWorker = ptr.To[int32](8)
				j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr.To[int32](16)
			},
			got: func(t *testing.T, r *Result) any {
				return []int32{*r.TrainJob.Spec.Trainer.NumNodes, *r.TrainJob.Spec.Trainer.NumProcPerNode,
					*r.Runtime.Spec.MLPolicy.NumNodes, *r.Runtime.Spec.MLPolicy.MPI.NumProcPerNode}
			},
			want: []int32{16, 8, 16, 8},
		},
		{
			name:   "runLauncherAsWorker counts the launcher as a node",
			mutate: func(j *kubeflow.MPIJob) { j.Spec.RunLauncherAsWorker = ptr.To(true) },
			got: func(t *testing.T, r *Result) any {
				return []any{*r.TrainJob.Spec.Trainer.NumNodes, *r.Runtime.Spec.MLPolicy.MPI.RunLauncherAsNode}
			},
			want: []any{int32(3), true},
		},
		{
			name:   "Intel MPI is kept",
			mutate: func(j *kubeflow.MPIJob) { j.Spec.MPIImplementation = kubeflow.MPIImplementationIntel },
			got:    func(t *testing.T, r *Result) any { return *r.Runtime.Spec.MLPolicy.MPI.MPIImplementation },
			want:   trainer.MPIImplementationIntel,
		},
		{
			name:   "MPICH is kept",
			mutate: func(j *kubeflow.MPIJob) { j.Spec.MPIImplementation = kubeflow.MPIImplementationMPICH },
			got:    func(t *testing.T, r *Result) any { return *r.Runtime.Spec.MLPolicy.MPI.MPIImplementation },
			want:   trainer.MPIImplementationMPICH,
		},
		{
			name:   "sshAuthMountPath defaults to /root/.ssh and is kept",
			mutate: func(j *kubeflow.MPIJob) {},
			got:    func(t *testing.T, r *Result) any { return *r.Runtime.Spec.MLPolicy.MPI.SSHAuthMountPath },
			want:   "/root/.ssh",
		},
		{
			name: "runPolicy: suspend, activeDeadlineSeconds to the TrainJob; backoffLimit to the launcher Job; TTL to the JobSet",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.RunPolicy.Suspend = ptr.To(true)
				j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](3600)
				j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](4)
				j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](30)
			},
			got: func(t *testing.T, r *Result) any {
				return []any{*r.TrainJob.Spec.Suspend, r.TrainJob.Spec.ActiveDeadlineSeconds,
					*replicatedJob(t, r, mpi.LauncherJob).Template.Spec.BackoffLimit, *r.Runtime.Spec.Template.Spec.TTLSecondsAfterFinished}
			},
			want: []any{true, int64(3600), int32(4), int32(30)},
			wantLevels: map[string]Level{
				"spec.runPolicy.suspend":                 LevelNote,
				"spec.runPolicy.activeDeadlineSeconds":   LevelChange,
				"spec.runPolicy.backoffLimit":            LevelNote,
				"spec.runPolicy.ttlSecondsAfterFinished": LevelWarning,
			},
		},
		{
			name: "Kueue labels: the queue label is carried, schedulingPolicy fills what is missing",
			mutate: func(j *kubeflow.MPIJob) {
				j.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "lq", "team": "a"}
				j.Spec.RunPolicy.SchedulingPolicy = &kubeflow.SchedulingPolicy{Queue: "other", PriorityClass: "high", MinAvailable: ptr.To[int32](3)}
			},
			got: func(t *testing.T, r *Result) any { return r.TrainJob.Labels },
			want: map[string]string{
				"kueue.x-k8s.io/queue-name":     "lq",
				"kueue.x-k8s.io/priority-class": "high",
				"team":                          "a",
			},
			wantLevels: map[string]Level{
				"metadata.labels[kueue.x-k8s.io/queue-name]":    LevelNote,
				"spec.runPolicy.schedulingPolicy.queue":         LevelWarning,
				"spec.runPolicy.schedulingPolicy.priorityClass": LevelWarning,
				"spec.runPolicy.schedulingPolicy.minAvailable":  LevelNote,
			},
		},
		{
			name: "a Volcano queue becomes the Kueue queue label; a partial gang is dropped with a warning",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.RunPolicy.SchedulingPolicy = &kubeflow.SchedulingPolicy{Queue: "gpu", MinAvailable: ptr.To[int32](2),
					MinResources: &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, ScheduleTimeoutSeconds: ptr.To[int32](60)}
			},
			got:  func(t *testing.T, r *Result) any { return r.TrainJob.Labels },
			want: map[string]string{"kueue.x-k8s.io/queue-name": "gpu"},
			wantLevels: map[string]Level{
				"spec.runPolicy.schedulingPolicy.queue":                  LevelWarning,
				"spec.runPolicy.schedulingPolicy.minAvailable":           LevelWarning,
				"spec.runPolicy.schedulingPolicy.minResources":           LevelWarning,
				"spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds": LevelWarning,
			},
		},
		{
			name: "the launcher depends on no job: Torus holds mpirun until the workers answer; the node job comes first",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.LauncherCreationPolicy = kubeflow.LauncherCreationPolicyWaitForWorkersReady
			},
			got: func(t *testing.T, r *Result) any {
				jobs := r.Runtime.Spec.Template.Spec.ReplicatedJobs
				return []any{jobs[0].Name, jobs[1].Name, jobs[1].DependsOn, jobs[1].Template.Labels}
			},
			want: []any{"node", "launcher", []jobsetv1alpha2.DependsOn(nil),
				map[string]string{mpi.LabelAncestor: mpi.AncestorTrainer}},
			wantLevels: map[string]Level{"spec.launcherCreationPolicy": LevelNote},
		},
		{
			name:       "AtStartup is what Torus does",
			mutate:     func(j *kubeflow.MPIJob) { j.Spec.LauncherCreationPolicy = kubeflow.LauncherCreationPolicyAtStartup },
			got:        func(t *testing.T, r *Result) any { return len(replicatedJob(t, r, mpi.LauncherJob).DependsOn) },
			want:       0,
			wantLevels: map[string]Level{"spec.launcherCreationPolicy": LevelNote},
		},
		{
			name: "pod settings stay on their replicated job",
			mutate: func(j *kubeflow.MPIJob) {
				w := workerOf(j)
				w.Annotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "ib0"}
				w.Spec.NodeSelector = map[string]string{"ib": "yes"}
				w.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
				w.Spec.Volumes = []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
				l := launcherOf(j)
				l.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "reg"}}
				l.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
				l.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
			},
			got: func(t *testing.T, r *Result) any {
				w, l := worker(t, r), launcher(t, r)
				return []any{w.Annotations, w.Spec.NodeSelector, len(w.Spec.Tolerations), w.Spec.Volumes[0].Name, w.Spec.ImagePullSecrets,
					l.Annotations, l.Spec.ImagePullSecrets, *l.Spec.SecurityContext.RunAsUser, l.Spec.Affinity != nil}
			},
			want: []any{map[string]string{"k8s.v1.cni.cncf.io/networks": "ib0"}, map[string]string{"ib": "yes"}, 1, "shm", []corev1.LocalObjectReference(nil),
				map[string]string(nil), []corev1.LocalObjectReference{{Name: "reg"}}, int64(1000), true},
		},
		{
			name: "containers become node, and references to them follow",
			mutate: func(j *kubeflow.MPIJob) {
				w := workerOf(j)
				w.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MEM", ValueFrom: &corev1.EnvVarSource{
					ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "worker", Resource: "limits.memory"}}}}
				w.Spec.Containers = append(w.Spec.Containers, corev1.Container{Name: "node", Image: "sidecar"})
			},
			got: func(t *testing.T, r *Result) any {
				w := worker(t, r)
				return []string{w.Spec.Containers[0].Name, w.Spec.Containers[0].Env[0].ValueFrom.ResourceFieldRef.ContainerName, w.Spec.Containers[1].Name,
					launcher(t, r).Spec.Containers[0].Name}
			},
			want: []string{"node", "node", "node-sidecar", "node"},
			wantLevels: map[string]Level{
				"spec.mpiReplicaSpecs[Worker].template.spec.containers[0].name":   LevelChange,
				"spec.mpiReplicaSpecs[Worker].template.spec.containers[1].name":   LevelWarning,
				"spec.mpiReplicaSpecs[Launcher].template.spec.containers[0].name": LevelChange,
			},
		},
		{
			name:   "workers with no command run Torus's sshd, and become Ready when it answers",
			mutate: func(j *kubeflow.MPIJob) { j.Spec.SSHAuthMountPath = "/home/u/.ssh" },
			got: func(t *testing.T, r *Result) any {
				c := worker(t, r).Spec.Containers[0]
				return []any{c.Command, c.Args, c.StartupProbe.TCPSocket.Port.IntValue()}
			},
			want: []any{[]string{"/usr/sbin/sshd"}, []string{"-De", "-f", "/home/u/.ssh/sshd_config"}, 2222},
			wantLevels: map[string]Level{
				"spec.mpiReplicaSpecs[Worker].template.spec.containers[0].command":      LevelChange,
				"spec.mpiReplicaSpecs[Worker].template.spec.containers[0].startupProbe": LevelChange,
			},
		},
		{
			name: "image, command and worker resources reach the TrainJob; launcher resources stay in the runtime",
			mutate: func(j *kubeflow.MPIJob) {
				workerOf(j).Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
				launcherOf(j).Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			},
			got: func(t *testing.T, r *Result) any {
				tr := r.TrainJob.Spec.Trainer
				return []any{*tr.Image, tr.Command, tr.Args, tr.ResourcesPerNode.Limits.Name("nvidia.com/gpu", resource.DecimalSI).String(),
					launcher(t, r).Spec.Containers[0].Resources.Limits.Cpu().String()}
			},
			want: []any{"app:1", []string{"mpirun"}, []string{"./app"}, "4", "1"},
		},
		{
			name: "environment variables Torus sets are removed from the launcher; mpi-operator's own are added",
			mutate: func(j *kubeflow.MPIJob) {
				launcherOf(j).Spec.Containers[0].Env = []corev1.EnvVar{{Name: mpi.EnvOMPIHostfile, Value: "/tmp/h"}, {Name: "A", Value: "1"}}
			},
			got: func(t *testing.T, r *Result) any { return launcher(t, r).Spec.Containers[0].Env },
			want: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: envJobRole, Value: "launcher"},
				{Name: "NVIDIA_VISIBLE_DEVICES"}, {Name: "NVIDIA_DRIVER_CAPABILITIES"}},
			wantLevels: map[string]Level{"spec.mpiReplicaSpecs[Launcher].template.spec.containers[0].env[0]": LevelWarning},
		},
		{
			name: "replica restart policies apply to pods; workers never restart in place",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].RestartPolicy = kubeflow.RestartPolicyOnFailure
				launcherOf(j).Spec.RestartPolicy = corev1.RestartPolicyAlways
			},
			got: func(t *testing.T, r *Result) any {
				return []corev1.RestartPolicy{launcher(t, r).Spec.RestartPolicy, worker(t, r).Spec.RestartPolicy}
			},
			want: []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever},
			wantLevels: map[string]Level{
				"spec.mpiReplicaSpecs[Worker].restartPolicy":                 LevelWarning,
				"spec.mpiReplicaSpecs[Launcher].template.spec.restartPolicy": LevelWarning,
			},
		},
		{
			name:       "MultiKueue keeps managing the job",
			mutate:     func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.ManagedBy = ptr.To(kubeflow.MultiKueueController) },
			got:        func(t *testing.T, r *Result) any { return *r.TrainJob.Spec.ManagedBy },
			want:       kubeflow.MultiKueueController,
			wantLevels: map[string]Level{"spec.runPolicy.managedBy": LevelWarning},
		},
		{
			name: "cleanPodPolicy: Running is what JobSet does; All and None have no equivalent",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflow.CleanPodPolicyAll)
			},
			got:        func(t *testing.T, r *Result) any { return r.TrainJob != nil },
			want:       true,
			wantLevels: map[string]Level{"spec.runPolicy.cleanPodPolicy": LevelWarning},
		},
		{
			name:   "the job's name, namespace, labels and annotations carry over",
			mutate: func(j *kubeflow.MPIJob) { j.Annotations = map[string]string{"a": "b"} },
			got: func(t *testing.T, r *Result) any {
				return []any{r.TrainJob.Name, r.TrainJob.Namespace, r.TrainJob.Annotations, r.Runtime.Name, r.Runtime.Namespace,
					r.TrainJob.Spec.RuntimeRef}
			},
			want: []any{"job", "ns", map[string]string{"a": "b"}, "job", "ns",
				trainer.RuntimeRef{Name: "job", APIGroup: ptr.To("trainer.kubeflow.org"), Kind: ptr.To("TrainingRuntime")}},
		},
		{
			name: "a job the shipped runtime expresses refers to it in reuse mode",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh"
				for _, pt := range []*corev1.PodTemplateSpec{launcherOf(j), workerOf(j)} {
					pt.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
					pt.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: "1"}}
				}
			},
			got: func(t *testing.T, r *Result) any {
				return []any{r.Runtime == nil, r.TrainJob.Spec.RuntimeRef, r.TrainJob.Spec.Trainer.Env}
			},
			want: []any{true, trainer.RuntimeRef{Name: "torus-openmpi", APIGroup: ptr.To("trainer.kubeflow.org"), Kind: ptr.To("ClusterTrainingRuntime")},
				[]corev1.EnvVar{{Name: "X", Value: "1"}}},
		},
		{
			name: "the same job gets its own runtime in generate mode",
			mutate: func(j *kubeflow.MPIJob) {
				j.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh"
				for _, pt := range []*corev1.PodTemplateSpec{launcherOf(j), workerOf(j)} {
					pt.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
				}
			},
			opts: Options{RuntimeMode: RuntimeModeGenerate},
			got:  func(t *testing.T, r *Result) any { return *r.TrainJob.Spec.RuntimeRef.Kind },
			want: trainer.TrainingRuntimeKind,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := baseJob()
			tc.mutate(job)
			before := job.DeepCopy()
			r := convertJob(job, tc.opts)
			if err := r.Err(); err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if diff := cmp.Diff(before, job); diff != "" {
				t.Errorf("Convert modified its input (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, tc.got(t, r)); diff != "" {
				t.Errorf("(-want,+got):\n%s\nfindings:\n%s", diff, findingsText(r.Findings))
			}
			got := levels(r.Findings)
			for field := range got {
				if _, ok := tc.wantLevels[field]; !ok {
					delete(got, field)
				}
			}
			if diff := cmp.Diff(tc.wantLevels, got, cmpEmptyMaps); diff != "" {
				t.Errorf("finding levels by field (-want,+got):\n%s\nfindings:\n%s", diff, findingsText(r.Findings))
			}
		})
	}
}

var cmpEmptyMaps = cmp.FilterValues(func(a, b map[string]Level) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestConvertRefuses(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(*kubeflow.MPIJob)
		wantField string
		wantMsg   string
	}{
		{"a name with dots", func(j *kubeflow.MPIJob) { j.Name = "my.job" }, "metadata.name", `contains "."`},
		{"a name over 63 characters", func(j *kubeflow.MPIJob) { j.Name = strings.Repeat("a", 64) }, "metadata.name", "is 64 characters; a TrainJob name is an RFC 1035 label of at most 63"},
		{"a name too long for pod host names", func(j *kubeflow.MPIJob) { j.Name = strings.Repeat("a", 51) }, "metadata.name", "needs at most 44 so that pod names"},
		{"a name too long for JobSet's pod names", func(j *kubeflow.MPIJob) { j.Name = strings.Repeat("a", 45) }, "metadata.name", "is 45 characters; an MPI job needs at most 44"},
		{"a name starting with a digit", func(j *kubeflow.MPIJob) { j.Name = "1job" }, "metadata.name", "is not an RFC 1035 label"},
		{"no name", func(j *kubeflow.MPIJob) { j.Name = "" }, "metadata.name", "is empty"},
		{"no launcher", func(j *kubeflow.MPIJob) { delete(j.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeLauncher) }, "spec.mpiReplicaSpecs", "has no Launcher"},
		{"no workers", func(j *kubeflow.MPIJob) { delete(j.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeWorker) }, "spec.mpiReplicaSpecs", "has no Worker"},
		{"zero workers", func(j *kubeflow.MPIJob) {
			j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr.To[int32](0)
		}, "spec.mpiReplicaSpecs[Worker].replicas", "at least 1 worker"},
		{"two launchers", func(j *kubeflow.MPIJob) {
			j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Replicas = ptr.To[int32](2)
		}, "spec.mpiReplicaSpecs[Launcher].replicas", "exactly 1 launcher"},
		{"zero slots", func(j *kubeflow.MPIJob) { j.Spec.SlotsPerWorker = ptr.To[int32](0) }, "spec.slotsPerWorker", "at least 1 slot"},
		{"an unknown implementation", func(j *kubeflow.MPIJob) { j.Spec.MPIImplementation = "MVAPICH" }, "spec.mpiImplementation", `mpiImplementation "MVAPICH" is not supported: use OpenMPI, Intel or MPICH`},
		{"restartPolicy ExitCode", func(j *kubeflow.MPIJob) {
			j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].RestartPolicy = kubeflow.RestartPolicyExitCode
		}, "spec.mpiReplicaSpecs[Worker].restartPolicy", "accepts Never and OnFailure"},
		{"an unknown cleanPodPolicy", func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.CleanPodPolicy = ptr.To[kubeflow.CleanPodPolicy]("Some") }, "spec.runPolicy.cleanPodPolicy", "accepts None, Running and All"},
		{"an unknown managedBy", func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.ManagedBy = ptr.To("me") }, "spec.runPolicy.managedBy", "is not valid"},
		{"a zero deadline", func(j *kubeflow.MPIJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](0) }, "spec.runPolicy.activeDeadlineSeconds", "at least 1 second"},
		{"a relative SSH path", func(j *kubeflow.MPIJob) { j.Spec.SSHAuthMountPath = ".ssh" }, "spec.sshAuthMountPath", "not an absolute path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := baseJob()
			tc.mutate(job)
			r := convertJob(job, Options{})
			if r.TrainJob != nil || r.Runtime != nil {
				t.Errorf("Convert returned objects for a job it should refuse")
			}
			var got []string
			for _, f := range r.Findings {
				if f.Level == LevelError && f.Field == tc.wantField && strings.Contains(f.Message, tc.wantMsg) {
					got = append(got, f.Field)
				}
			}
			if diff := cmp.Diff([]string{tc.wantField}, got); diff != "" {
				t.Errorf("error findings matching %q (-want,+got):\n%s\nfindings:\n%s", tc.wantMsg, diff, findingsText(r.Findings))
			}
		})
	}
}

func TestRuntimeShape(t *testing.T) {
	r := convertJob(baseJob(), Options{})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	l := replicatedJob(t, r, mpi.LauncherJob)
	n := replicatedJob(t, r, mpi.NodeJob)
	got := []any{r.Runtime.Kind, r.Runtime.Labels, l.Template.Spec.BackoffLimit, *n.Template.Spec.BackoffLimit,
		l.Template.Spec.Template.Spec.RestartPolicy, n.Template.Spec.Template.Spec.RestartPolicy}
	want := []any{trainer.TrainingRuntimeKind, map[string]string{"trainer.kubeflow.org/framework": "mpi"}, (*int32)(nil), int32(0),
		corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
