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
	own := func(name string) corev1.Pod {
		return pod(name, controlledBy("Job", "batch/v1", "pi-node-0", "job-node"))
	}
	tests := map[string]struct {
		jobSet metav1.Object
		pods   []corev1.Pod
		want   []string
	}{
		"the job's JobSet":                  {jobSet: js, want: []string{"of-the-job"}},
		"every pod the job's":               {jobSet: js, pods: []corev1.Pod{own("a"), own("b")}, want: []string{"a", "b"}},
		"a planted pod between the job's":   {jobSet: js, pods: []corev1.Pod{own("a"), pod("planted", nil), own("b")}, want: []string{"a", "b"}},
		"a planted pod after the job's":     {jobSet: js, pods: []corev1.Pod{own("a"), own("b"), pod("planted", nil)}, want: []string{"a", "b"}},
		"no JobSet yet":                     {jobSet: nil},
		"a JobSet the job does not control": {jobSet: &metav1.ObjectMeta{Name: "pi", UID: "js"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := pods
			if tc.pods != nil {
				in = tc.pods
			}
			before := names(in)
			got := OwnPods(tj, tc.jobSet, []metav1.Object{node, planted}, in)
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, names(in)); diff != "" {
				t.Errorf("the pods given were modified (-before +after):\n%s", diff)
			}
		})
	}
}

// BenchmarkOwnPods is a reconcile's choice of a large job's pods, all of
// them its own.
func BenchmarkOwnPods(b *testing.B) {
	const workers = 4096
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "tj"}}
	js := &metav1.ObjectMeta{Name: "pi", UID: "js", OwnerReferences: controlledBy("TrainJob", "trainer.kubeflow.org/v1alpha1", "pi", "tj")}
	job := &metav1.ObjectMeta{Name: "pi-node-0", UID: "job-node", OwnerReferences: controlledBy("JobSet", "jobset.x-k8s.io/v1alpha2", "pi", "js")}
	pods := make([]corev1.Pod, workers)
	for i := range pods {
		pods[i].OwnerReferences = controlledBy("Job", "batch/v1", "pi-node-0", "job-node")
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := OwnPods(tj, js, []metav1.Object{job}, pods); len(got) != workers {
			b.Fatalf("%d pods, want %d", len(got), workers)
		}
	}
}
