package trainjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func controlledBy(kind, apiVersion, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: name, UID: uid, Controller: ptr.To(true)}}
}

func TestOwnPods(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "tj"}}
	js := &metav1.ObjectMeta{Name: "pi", UID: "js", OwnerReferences: controlledBy("TrainJob", "trainer.kubeflow.org/v1alpha1", "pi", "tj")}
	node := &metav1.ObjectMeta{Name: "pi-node-0", UID: "job-node", OwnerReferences: controlledBy("JobSet", "jobset.x-k8s.io/v1alpha2", "pi", "js")}
	planted := &metav1.ObjectMeta{Name: "pi-node-1", UID: "job-planted", OwnerReferences: controlledBy("JobSet", "jobset.x-k8s.io/v1alpha2", "pi", "another-js")}
	pod := func(name string, owners []metav1.OwnerReference) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners}}
	}
	pods := []corev1.Pod{
		pod("of-the-job", controlledBy("Job", "batch/v1", "pi-node-0", "job-node")),
		pod("labels-only", nil),
		pod("the-jobs-name-another-uid", controlledBy("Job", "batch/v1", "pi-node-0", "job-forged")),
		pod("of-a-job-another-jobset-controls", controlledBy("Job", "batch/v1", "pi-node-1", "job-planted")),
		pod("the-jobs-uid-another-kind", controlledBy("ReplicaSet", "apps/v1", "pi-node-0", "job-node")),
		pod("owned-not-controlled", []metav1.OwnerReference{{Kind: "Job", APIVersion: "batch/v1", Name: "pi-node-0", UID: "job-node"}}),
	}
	names := func(ps []corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	tests := map[string]struct {
		jobSet metav1.Object
		want   []string
	}{
		"the job's JobSet":                  {jobSet: js, want: []string{"of-the-job"}},
		"no JobSet yet":                     {jobSet: nil},
		"a JobSet the job does not control": {jobSet: &metav1.ObjectMeta{Name: "pi", UID: "js"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := OwnPods(tj, tc.jobSet, []metav1.Object{node, planted}, pods)
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
		})
	}
}
