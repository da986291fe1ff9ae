package children

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// patchOf is a runtime patch of one replicated job's pods.
func patchOf(manager, job string, m *metav1.ObjectMeta, ps *trainer.PodSpecPatch) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
			Name: job, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Metadata: m, Spec: ps}}},
		}}}},
	}}
}

// templateSpec is a runtime's JobSet spec: a launcher, and a node job whose
// pods also run a sidecar after an init container that fetches data.
func templateSpec() *jobsetv1alpha2.JobSetSpec {
	pod := func(ps corev1.PodSpec) jobsetv1alpha2.ReplicatedJob {
		var rj jobsetv1alpha2.ReplicatedJob
		rj.Template.Spec.Template.Spec = ps
		return rj
	}
	launcher := pod(corev1.PodSpec{Containers: []corev1.Container{{Name: mpi.TrainerContainer, Image: "mpi:1",
		Env: []corev1.EnvVar{{Name: "FROM_RUNTIME", Value: "1"}}}}})
	launcher.Name = mpi.LauncherJob
	node := pod(corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "fetch", Image: "fetch:1"}},
		Containers:     []corev1.Container{{Name: mpi.TrainerContainer, Image: "mpi:1"}, {Name: "sidecar", Image: "side:1"}},
		Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
		NodeSelector:   map[string]string{"pool": "gpu"},
	})
	node.Name = mpi.NodeJob
	return &jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{launcher, node}}
}

func TestPatchTemplate(t *testing.T) {
	data := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets"}}}
	dataMount := corev1.VolumeMount{Name: "data", MountPath: "/data", ReadOnly: true}
	podOf := func(s *jobsetv1alpha2.JobSetSpec, job int) *corev1.PodTemplateSpec {
		return &s.ReplicatedJobs[job].Template.Spec.Template
	}
	cases := map[string]struct {
		patches []trainer.RuntimePatch
		// want changes the runtime's template into what the patches make.
		want    func(s *jobsetv1alpha2.JobSetSpec)
		wantErr string
	}{
		"no patches": {want: func(*jobsetv1alpha2.JobSetSpec) {}},
		"a volume and its mount, pull secrets and a service account": {
			patches: []trainer.RuntimePatch{patchOf("torus-mpi.io/kubectl-mpi", mpi.LauncherJob, nil, &trainer.PodSpecPatch{
				Volumes:            []corev1.Volume{data},
				Containers:         []trainer.ContainerPatch{{Name: mpi.TrainerContainer, VolumeMounts: []corev1.VolumeMount{dataMount}}},
				ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
				ServiceAccountName: ptr.To("trainer"),
			})},
			want: func(s *jobsetv1alpha2.JobSetSpec) {
				ps := &podOf(s, 0).Spec
				ps.Volumes = []corev1.Volume{data}
				ps.Containers[0].VolumeMounts = []corev1.VolumeMount{dataMount}
				ps.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
				ps.ServiceAccountName = "trainer"
			},
		},
		"env, mounts and security contexts of containers by name, the runtime's env kept": {
			patches: []trainer.RuntimePatch{patchOf("example.com/team", mpi.NodeJob, nil, &trainer.PodSpecPatch{
				InitContainers: []trainer.ContainerPatch{{Name: "fetch", Env: []corev1.EnvVar{{Name: "BUCKET", Value: "s3://b"}}}},
				Containers: []trainer.ContainerPatch{{Name: "sidecar", Env: []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}},
					{Name: mpi.TrainerContainer, SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}}},
				SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)},
				Affinity:                      &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
				TerminationGracePeriodSeconds: ptr.To[int64](5),
			})},
			want: func(s *jobsetv1alpha2.JobSetSpec) {
				ps := &podOf(s, 1).Spec
				ps.InitContainers[0].Env = []corev1.EnvVar{{Name: "BUCKET", Value: "s3://b"}}
				ps.Containers[1].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
				ps.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
				ps.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)}
				ps.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
				ps.TerminationGracePeriodSeconds = ptr.To[int64](5)
			},
		},
		"placement: node selectors merge key by key, tolerations replace the runtime's, gates add": {
			patches: []trainer.RuntimePatch{patchOf(mpi.KueueManager, mpi.NodeJob, &metav1.ObjectMeta{Labels: map[string]string{"team": "hpc"}}, &trainer.PodSpecPatch{
				NodeSelector:    map[string]string{"zone": "a"},
				Tolerations:     []corev1.Toleration{{Key: "flavor", Operator: corev1.TolerationOpExists}},
				SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}},
			})},
			want: func(s *jobsetv1alpha2.JobSetSpec) {
				pod := podOf(s, 1)
				pod.Labels = map[string]string{"team": "hpc"}
				pod.Spec.NodeSelector = map[string]string{"pool": "gpu", "zone": "a"}
				pod.Spec.Tolerations = []corev1.Toleration{{Key: "flavor", Operator: corev1.TolerationOpExists}}
				pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
			},
		},
		"later patches win": {
			patches: []trainer.RuntimePatch{
				patchOf(mpi.KueueManager, mpi.NodeJob, nil, &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": "a"}}),
				patchOf("example.com/other", mpi.NodeJob, nil, &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": "b"}}),
			},
			want: func(s *jobsetv1alpha2.JobSetSpec) {
				podOf(s, 1).Spec.NodeSelector = map[string]string{"pool": "gpu", "zone": "b"}
			},
		},
		"Torus's labels, gate, volumes, mounts and init container are left out": {
			patches: []trainer.RuntimePatch{patchOf("example.com/x", mpi.NodeJob,
				&metav1.ObjectMeta{Labels: map[string]string{api.LabelJobName: "other-job", "team": "hpc"}, Annotations: map[string]string{api.AnnotationKeepSSHKeys: "true"}},
				&trainer.PodSpecPatch{
					Volumes:         []corev1.Volume{{Name: mpi.SSHSecretVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other-mpi-ssh"}}}},
					SchedulingGates: []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}},
					InitContainers:  []trainer.ContainerPatch{{Name: mpi.SSHInitContainer, Env: []corev1.EnvVar{{Name: "X", Value: "1"}}}},
					Containers: []trainer.ContainerPatch{{Name: mpi.TrainerContainer, VolumeMounts: []corev1.VolumeMount{
						{Name: mpi.SSHSecretVolume, MountPath: "/keys"}, dataMount}}},
				})},
			want: func(s *jobsetv1alpha2.JobSetSpec) {
				pod := podOf(s, 1)
				pod.Labels = map[string]string{"team": "hpc"}
				pod.Annotations = map[string]string{}
				pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{dataMount}
			},
		},
		"a replicated job the runtime lacks": {
			patches: []trainer.RuntimePatch{{Manager: "example.com/m", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "dataset-initializer"}}}}}}},
			wantErr: `runtimePatches from example.com/m name replicated job "dataset-initializer", which the runtime does not have`,
		},
		"a container the runtime lacks": {
			patches: []trainer.RuntimePatch{patchOf("example.com/m", mpi.LauncherJob, nil, &trainer.PodSpecPatch{
				Containers: []trainer.ContainerPatch{{Name: "sidecar", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}})},
			wantErr: `runtimePatches from example.com/m name container "sidecar", which replicated job "launcher" of the runtime does not have`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := patchTemplate(templateSpec(), tc.patches)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := templateSpec()
			tc.want(want)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("patched template (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPatchTemplateKeepsTheRuntimesOrder(t *testing.T) {
	spec := templateSpec()
	spec.ReplicatedJobs = append(spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{Name: "extra"})
	got, err := patchTemplate(spec, []trainer.RuntimePatch{
		patchOf("example.com/m", "extra", &metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, nil),
		patchOf("example.com/m", mpi.LauncherJob, &metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rj := range got.ReplicatedJobs {
		names = append(names, rj.Name)
	}
	if diff := cmp.Diff([]string{mpi.LauncherJob, mpi.NodeJob, "extra"}, names); diff != "" {
		t.Errorf("replicated jobs (-want,+got):\n%s", diff)
	}
}

func TestPatchMetadata(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"runtime": "label"}}}
	patchMetadata(js, []trainer.RuntimePatch{
		{Manager: "example.com/a", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Metadata: &metav1.ObjectMeta{
			Labels: map[string]string{"team": "a", api.LabelJobName: "victim"}, Annotations: map[string]string{"note": "x"}}}}},
		{Manager: "example.com/b", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Metadata: &metav1.ObjectMeta{
			Labels: map[string]string{"team": "b"}}}}},
	})
	want := metav1.ObjectMeta{Labels: map[string]string{"runtime": "label", "team": "b"}, Annotations: map[string]string{"note": "x"}}
	if diff := cmp.Diff(want, js.ObjectMeta); diff != "" {
		t.Errorf("JobSet metadata (-want,+got):\n%s", diff)
	}
}
