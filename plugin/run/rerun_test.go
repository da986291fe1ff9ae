package run

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestClone(t *testing.T) {
	orig := BuildTrainJob(Spec{Name: "pi", Namespace: "ns", Image: "img", Workers: ptr.To[int32](2), Queue: "q"})
	orig.UID, orig.ResourceVersion = "uid", "7"
	orig.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"}
	orig.Spec.Suspend = ptr.To(true)
	orig.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: mpi.KueueManager}, {Manager: "example.com/other"}}
	orig.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue}}

	got := cloneJob(orig, "pi-2")
	want := BuildTrainJob(Spec{Name: "pi-2", Namespace: "ns", Image: "img", Workers: ptr.To[int32](2), Queue: "q"})
	want.Annotations = map[string]string{"team": "a", api.AnnotationRerunOf: "pi"}
	want.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/other"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Clone (-want,+got):\n%s", diff)
	}
}

func TestNextName(t *testing.T) {
	rerun := func(name string) *trainer.TrainJob {
		tj := mpi.NewTrainJob(name, "ns")
		tj.Annotations = map[string]string{api.AnnotationRerunOf: "x"}
		return tj
	}
	cases := map[string]struct {
		orig  *trainer.TrainJob
		taken []string
		want  string
	}{
		"first rerun":                {orig: mpi.NewTrainJob("pi", "ns"), want: "pi-2"},
		"skips taken names":          {orig: mpi.NewTrainJob("pi", "ns"), taken: []string{"pi-2", "pi-3"}, want: "pi-4"},
		"a rerun counts on":          {orig: rerun("pi-2"), want: "pi-3"},
		"a job named with a number":  {orig: mpi.NewTrainJob("resnet-50", "ns"), want: "resnet-50-2"},
		"a rerun of a numbered name": {orig: rerun("resnet-50-2"), taken: []string{"resnet-50-3"}, want: "resnet-50-4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			taken := func(n string) bool {
				for _, x := range tc.taken {
					if x == n {
						return true
					}
				}
				return false
			}
			if got := nextName(tc.orig, taken); got != tc.want {
				t.Errorf("NextName() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCopiedRuntime(t *testing.T) {
	rt := runtimeWith(corev1Requirements(), corev1Requirements())
	vols := []Volume{{Claim: "data", MountPath: "/data"}, {Claim: "m", MountPath: "/m", ReadOnly: true}}
	mountInCopy(&rt.Spec, vols)
	ref, got, ok := copiedRuntime(map[string]string{api.AnnotationRuntimeCopyOf: "ClusterTrainingRuntime/torus-openmpi"}, &rt.Spec)
	if !ok {
		t.Fatal("CopiedRuntime() found no copy")
	}
	wantRef := trainer.RuntimeRef{Name: "torus-openmpi", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	if diff := cmp.Diff(wantRef, ref); diff != "" {
		t.Errorf("ref (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(vols, got); diff != "" {
		t.Errorf("volumes (-want,+got):\n%s", diff)
	}
	if _, _, ok := copiedRuntime(nil, &trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{}}}); ok {
		t.Error("CopiedRuntime() found a copy in a runtime without the annotation")
	}
}

// mountInCopy mounts claims into the MPI container of a runtime's launcher
// and node pods, as a job's own runtime copy holds them
// (api.AnnotationRuntimeCopyOf).
func mountInCopy(spec *trainer.TrainingRuntimeSpec, vols []Volume) {
	for i := range spec.Template.Spec.ReplicatedJobs {
		ps := &spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for c := range ps.Containers {
			if ps.Containers[c].Name != mpi.TrainerContainer {
				continue
			}
			for _, v := range vols {
				ps.Volumes = append(ps.Volumes, corev1.Volume{Name: v.Name(), VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.Claim, ReadOnly: v.ReadOnly}}})
				ps.Containers[c].VolumeMounts = append(ps.Containers[c].VolumeMounts, corev1.VolumeMount{Name: v.Name(), MountPath: v.MountPath, ReadOnly: v.ReadOnly})
			}
		}
	}
}
