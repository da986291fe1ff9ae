package run

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func runtimeRef(kind, name string) trainer.RuntimeRef {
	return trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(kind)}
}

func TestBuildTrainJob(t *testing.T) {
	typeMeta := metav1.TypeMeta{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob"}
	cases := map[string]struct {
		spec Spec
		want *trainer.TrainJob
	}{
		"the runtime follows the implementation": {
			spec: Spec{Name: "pi", Namespace: "ns", Implementation: mpi.IntelMPI, Image: "img"},
			want: &trainer.TrainJob{
				TypeMeta:   typeMeta,
				ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns"},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: runtimeRef(trainer.ClusterTrainingRuntimeKind, "torus-intelmpi"),
					Trainer:    &trainer.Trainer{Image: ptr.To("img")},
				},
			},
		},
		"Open MPI 5 is an annotation on the job": {
			spec: Spec{Name: "pi", Implementation: mpi.OpenMPI5},
			want: &trainer.TrainJob{
				TypeMeta: typeMeta,
				ObjectMeta: metav1.ObjectMeta{Name: "pi", Annotations: map[string]string{
					api.AnnotationOpenMPIVersion: "5",
				}},
				Spec: trainer.TrainJobSpec{RuntimeRef: runtimeRef(trainer.ClusterTrainingRuntimeKind, "torus-openmpi5")},
			},
		},
		"every flag": {
			spec: Spec{
				Name: "train", Namespace: "ml", Runtime: "mine", RuntimeKind: trainer.TrainingRuntimeKind,
				Image: "img:1", Command: []string{"mpirun", "-n", "8", "./train"},
				Workers: ptr.To[int32](4), SlotsPerWorker: ptr.To[int32](2), GPUs: ptr.To[int64](2),
				CPU: qty("4"), Memory: qty("16Gi"),
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
				Queue: "team", Priority: "high", NetworkProfile: "ib", Topology: "cloud.provider.com/topology-rack", SchedulingTimeout: "10m",
				MaxRestarts: "3", Checkpoint: "ckpt:/data", TerminationGracePeriod: "5m",
			},
			want: &trainer.TrainJob{
				TypeMeta: typeMeta,
				ObjectMeta: metav1.ObjectMeta{
					Name: "train", Namespace: "ml",
					Labels: map[string]string{mpi.KueueQueueLabel: "team", mpi.KueuePriorityLabel: "high"},
					Annotations: map[string]string{
						api.AnnotationNetworkProfile:         "ib",
						api.AnnotationTopology:               "cloud.provider.com/topology-rack",
						api.AnnotationSchedulingTimeout:      "10m",
						api.AnnotationMaxRestarts:            "3",
						api.AnnotationCheckpointVolume:       "ckpt:/data",
						api.AnnotationTerminationGracePeriod: "5m",
					},
				},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: runtimeRef(trainer.TrainingRuntimeKind, "mine"),
					Trainer: &trainer.Trainer{
						Image:          ptr.To("img:1"),
						Command:        []string{"mpirun"},
						Args:           []string{"-n", "8", "./train"},
						Env:            []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
						NumNodes:       ptr.To[int32](4),
						NumProcPerNode: ptr.To[int32](2),
						ResourcesPerNode: &corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), defaultGPUResource: resource.MustParse("2")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), defaultGPUResource: resource.MustParse("2")},
						},
					},
				},
			},
		},
		"a command without arguments": {
			spec: Spec{Name: "pi", Implementation: mpi.MPICH, Command: []string{"./pi"}, GPUResource: "amd.com/gpu", GPUs: ptr.To[int64](1)},
			want: &trainer.TrainJob{
				TypeMeta:   typeMeta,
				ObjectMeta: metav1.ObjectMeta{Name: "pi"},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: runtimeRef(trainer.ClusterTrainingRuntimeKind, "torus-mpich"),
					Trainer: &trainer.Trainer{
						Command: []string{"./pi"},
						ResourcesPerNode: &corev1.ResourceRequirements{
							Requests: corev1.ResourceList{"amd.com/gpu": resource.MustParse("1")},
							Limits:   corev1.ResourceList{"amd.com/gpu": resource.MustParse("1")},
						},
					},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := BuildTrainJob(tc.spec)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TrainJob (-want,+got):\n%s", diff)
			}
		})
	}
}

// Apply overrides what a spec sets and keeps the rest: rerun's clone and
// modify.
func TestApplyOverrides(t *testing.T) {
	base := func() *trainer.TrainJob {
		return BuildTrainJob(Spec{
			Name: "pi", Implementation: mpi.OpenMPI5, Image: "img", Command: []string{"mpirun", "./pi"},
			Workers: ptr.To[int32](2), GPUs: ptr.To[int64](4), Memory: qty("1Gi"),
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
		})
	}
	cases := map[string]struct {
		spec Spec
		edit func(*trainer.TrainJob)
	}{
		"nothing set changes nothing": {},
		"more workers": {
			spec: Spec{Workers: ptr.To[int32](8)},
			edit: func(tj *trainer.TrainJob) { tj.Spec.Trainer.NumNodes = ptr.To[int32](8) },
		},
		"zero GPUs removes the GPU request": {
			spec: Spec{GPUs: ptr.To[int64](0)},
			edit: func(tj *trainer.TrainJob) {
				delete(tj.Spec.Trainer.ResourcesPerNode.Requests, defaultGPUResource)
				delete(tj.Spec.Trainer.ResourcesPerNode.Limits, defaultGPUResource)
			},
		},
		"env replaces by name and adds": {
			spec: Spec{Env: []corev1.EnvVar{{Name: "A", Value: "2"}, {Name: "B", Value: "3"}}},
			edit: func(tj *trainer.TrainJob) {
				tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "A", Value: "2"}, {Name: "B", Value: "3"}}
			},
		},
		"back to Open MPI 4": {
			spec: Spec{Implementation: mpi.OpenMPI},
			edit: func(tj *trainer.TrainJob) { tj.Annotations[api.AnnotationOpenMPIVersion] = "4" },
		},
		"a new command drops the old arguments": {
			spec: Spec{Command: []string{"./other"}},
			edit: func(tj *trainer.TrainJob) {
				tj.Spec.Trainer.Command = []string{"./other"}
				tj.Spec.Trainer.Args = nil
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := base()
			if tc.edit != nil {
				tc.edit(want)
			}
			got := base()
			tc.spec.Apply(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("TrainJob (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	cases := map[string]struct {
		spec    Spec
		wantErr []string
	}{
		"valid": {spec: Spec{Name: "pi", Workers: ptr.To[int32](2), Env: []corev1.EnvVar{{Name: "OMP_NUM_THREADS", Value: "1"}}}},
		"bad name": {
			spec:    Spec{Name: "Pi_1"},
			wantErr: []string{`job name "Pi_1" is not an RFC 1035 label`},
		},
		"a name too long for host names": {
			spec:    Spec{Name: strings.Repeat("a", 60)},
			wantErr: []string{"an MPI job needs at most 44"},
		},
		"counts": {
			spec: Spec{Workers: ptr.To[int32](0), SlotsPerWorker: ptr.To[int32](-1), GPUs: ptr.To[int64](-2), Memory: qty("-1Gi")},
			wantErr: []string{
				"--workers=0: a job needs at least 1 worker",
				"--slots-per-worker=-1: each worker runs at least 1 rank",
				"--gpus=-2: the GPU count cannot be negative",
				"--memory=-1Gi: the memory request cannot be negative",
			},
		},
		"reserved and duplicate env": {
			spec: Spec{Env: []corev1.EnvVar{{Name: mpi.EnvOMPIHostfile}, {Name: "X"}, {Name: "X"}, {Name: "1BAD"}}},
			wantErr: []string{
				"--env OMPI_MCA_orte_default_hostfile: Torus sets OMPI_MCA_orte_default_hostfile",
				"--env X is given twice",
				"--env 1BAD: a valid environment variable name must consist of",
			},
		},
		"topology must be a label": {
			spec:    Spec{Topology: "rack level"},
			wantErr: []string{`--topology "rack level" must be a node label`},
		},
		"scheduling timeout must be a duration": {
			spec:    Spec{SchedulingTimeout: "soon"},
			wantErr: []string{`--scheduling-timeout "soon" must be a positive duration such as 10m or 90s`},
		},
		"no restarts":      {spec: Spec{MaxRestarts: "0"}},
		"a restart budget": {spec: Spec{MaxRestarts: "100"}},
		"a negative restart budget": {
			spec:    Spec{MaxRestarts: "-1"},
			wantErr: []string{`--max-restarts "-1": give how many times the job may start again after its program fails, from 0 to 100`},
		},
		"an absurd restart budget": {
			spec:    Spec{MaxRestarts: "101"},
			wantErr: []string{`--max-restarts "101": give how many times`},
		},
		"a checkpoint claim":               {spec: Spec{Checkpoint: "ckpt"}},
		"a checkpoint claim and its place": {spec: Spec{Checkpoint: "ckpt:/data/ckpt"}},
		"a checkpoint claim of another namespace": {
			spec:    Spec{Checkpoint: "team-b/ckpt"},
			wantErr: []string{`--checkpoint-volume "team-b/ckpt": give CLAIM or CLAIM:/path, a ReadWriteMany PersistentVolumeClaim of the job's namespace and where to mount it (default /checkpoint): a pod mounts claims of its own namespace only, not of team-b`},
		},
		"a checkpoint place over Torus's files": {
			spec:    Spec{Checkpoint: "ckpt:/etc"},
			wantErr: []string{`--checkpoint-volume "ckpt:/etc": give CLAIM or CLAIM:/path`, "/etc would hide or collide with Torus's /etc/torus-mpi"},
		},
		"a grace period": {spec: Spec{TerminationGracePeriod: "90s"}},
		"a grace period longer than an hour": {
			spec:    Spec{TerminationGracePeriod: "90m"},
			wantErr: []string{`--termination-grace-period "90m": give how long every rank has from SIGTERM to write a checkpoint and exit, whole seconds from 1s to 1h0m0s`},
		},
		"a grace period that is no duration": {
			spec:    Spec{TerminationGracePeriod: "long"},
			wantErr: []string{`--termination-grace-period "long": give how long`},
		},
		"a stall timeout": {spec: Spec{StallTimeout: "30m"}},
		"a stall timeout shorter than a minute": {
			spec:    Spec{StallTimeout: "10s"},
			wantErr: []string{`--stall-timeout "10s": give how long the job's launcher may print nothing before the job fails, from 1m0s to 168h0m0s`},
		},
		"a restart budget that is not a count": {
			spec:    Spec{MaxRestarts: "forever"},
			wantErr: []string{`--max-restarts "forever": give how many times`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.spec.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestVolumes(t *testing.T) {
	vols := []Volume{{Claim: "data", MountPath: "/data"}, {Claim: "models", MountPath: "/models", ReadOnly: true}}
	if err := validateVolumes(vols, "/home/mpiuser/.ssh"); err != nil {
		t.Fatalf("ValidateVolumes() = %v", err)
	}
	for name, bad := range map[string]Volume{
		"relative":      {Claim: "data", MountPath: "data"},
		"over hostfile": {Claim: "data", MountPath: "/etc"},
		"over ssh":      {Claim: "data", MountPath: "/home/mpiuser"},
		"bad claim":     {Claim: "Data", MountPath: "/x"},
	} {
		if err := validateVolumes([]Volume{bad}, "/home/mpiuser/.ssh"); err == nil {
			t.Errorf("%s: ValidateVolumes(%+v) = nil, want an error", name, bad)
		}
	}

}

// Volumes, pull secrets and a service account reach the launcher's and the
// workers' pods through one runtime patch, on the runtime as it is; a rerun
// adds to it and replaces what it names again.
func TestPodPatch(t *testing.T) {
	pvc := func(claim string, ro bool) corev1.Volume {
		return corev1.Volume{Name: "pvc-" + claim, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: ro}}}
	}
	patchOf := func(vols []corev1.Volume, mounts []corev1.VolumeMount, secrets []string, sa *string) []trainer.RuntimePatch {
		var refs []corev1.LocalObjectReference
		for _, s := range secrets {
			refs = append(refs, corev1.LocalObjectReference{Name: s})
		}
		var rjs []trainer.ReplicatedJobPatch
		for _, job := range []string{mpi.LauncherJob, mpi.NodeJob} {
			ps := &trainer.PodSpecPatch{Volumes: vols, ImagePullSecrets: refs, ServiceAccountName: sa}
			if len(mounts) > 0 {
				ps.Containers = []trainer.ContainerPatch{{Name: mpi.TrainerContainer, VolumeMounts: mounts}}
			}
			rjs = append(rjs, trainer.ReplicatedJobPatch{Name: job, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: ps}}}})
		}
		return []trainer.RuntimePatch{{Manager: "torus-mpi.io/kubectl-mpi", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjs}}}}}
	}
	cases := map[string]struct {
		spec, rerun Spec
		want        []trainer.RuntimePatch
	}{
		"nothing asked, no patch": {},
		"a volume, pull secrets, a service account": {
			spec: Spec{Volumes: []Volume{{Claim: "data", MountPath: "/data", ReadOnly: true}}, ImagePullSecrets: []string{"registry"}, ServiceAccount: "trainer"},
			want: patchOf([]corev1.Volume{pvc("data", true)}, []corev1.VolumeMount{{Name: "pvc-data", MountPath: "/data", ReadOnly: true}}, []string{"registry"}, ptr.To("trainer")),
		},
		"a rerun adds a volume and a secret, and moves a mount": {
			spec:  Spec{Volumes: []Volume{{Claim: "data", MountPath: "/data"}}, ImagePullSecrets: []string{"registry"}},
			rerun: Spec{Volumes: []Volume{{Claim: "data", MountPath: "/input"}, {Claim: "out", MountPath: "/out"}}, ImagePullSecrets: []string{"registry", "mirror"}, ServiceAccount: "trainer"},
			want: patchOf([]corev1.Volume{pvc("data", false), pvc("out", false)},
				[]corev1.VolumeMount{{Name: "pvc-data", MountPath: "/input"}, {Name: "pvc-out", MountPath: "/out"}}, []string{"registry", "mirror"}, ptr.To("trainer")),
		},
		"a pull secret alone": {
			spec: Spec{ImagePullSecrets: []string{"registry"}},
			want: patchOf(nil, nil, []string{"registry"}, nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.spec.Name, tc.spec.Namespace = "pi", "ns"
			tj := BuildTrainJob(tc.spec)
			tc.rerun.Apply(tj)
			if diff := cmp.Diff(tc.want, tj.Spec.RuntimePatches); diff != "" {
				t.Errorf("runtime patches (-want,+got):\n%s", diff)
			}
		})
	}
}
