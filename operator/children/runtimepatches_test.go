package children

import (
	"maps"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestApplyRuntimePatches(t *testing.T) {
	podPatch := func(manager string, m *metav1.ObjectMeta, ps *trainer.PodSpecPatch) trainer.RuntimePatch {
		return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: mpi.NodeJob, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Metadata: m, Spec: ps}}},
			}}}},
		}}
	}
	cases := map[string]struct {
		patches    []trainer.RuntimePatch
		wantLabels map[string]string
		wantNodes  map[string]string
		wantErr    bool
	}{
		"any manager's placement": {
			patches:    []trainer.RuntimePatch{podPatch("example.com/scheduler", &metav1.ObjectMeta{Labels: map[string]string{"team": "hpc"}}, &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": "a"}})},
			wantLabels: map[string]string{api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "team": "hpc"},
			wantNodes:  map[string]string{"zone": "a"},
		},
		"later patches win": {
			patches: []trainer.RuntimePatch{
				podPatch(mpi.KueueManager, nil, &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": "a"}}),
				podPatch("example.com/other", nil, &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": "b"}}),
			},
			wantLabels: map[string]string{api.LabelJobName: "pi", api.LabelRole: api.RoleWorker},
			wantNodes:  map[string]string{"zone": "b"},
		},
		"Torus's labels stay Torus's": {
			patches:    []trainer.RuntimePatch{podPatch(mpi.KueueManager, &metav1.ObjectMeta{Labels: map[string]string{api.LabelJobName: "other-job", api.LabelRole: api.RoleLauncher}}, nil)},
			wantLabels: map[string]string{api.LabelJobName: "pi", api.LabelRole: api.RoleWorker},
		},
		"a replicated job the runtime lacks": {
			patches: []trainer.RuntimePatch{{Manager: "m", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "dataset-initializer"}}}}}}},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: mpi.NodeJob}}}}
			pod := &js.Spec.ReplicatedJobs[0].Template.Spec.Template
			pod.Labels = map[string]string{api.LabelJobName: "pi", api.LabelRole: api.RoleWorker}
			pod.Spec.Containers = []corev1.Container{{Name: mpi.TrainerContainer}}
			tj := &trainer.TrainJob{Spec: trainer.TrainJobSpec{RuntimePatches: tc.patches}}
			err := applyRuntimePatches(js, tj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, wantErr %t", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got := pod.Labels; !maps.Equal(got, tc.wantLabels) {
				t.Errorf("pod labels = %v, want %v", got, tc.wantLabels)
			}
			if got := pod.Spec.NodeSelector; !maps.Equal(got, tc.wantNodes) {
				t.Errorf("node selector = %v, want %v", got, tc.wantNodes)
			}
		})
	}
}
