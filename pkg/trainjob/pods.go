package trainjob

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// OwnPods keeps, of the pods that wear a TrainJob's labels, those of its own
// Jobs: a pod counts when its controller is one of jobs that jobSet
// controls, and jobSet is the one the TrainJob controls. Labels, names and
// annotations are written by whoever creates an object, so they find the
// candidates and the chain of controllers by UID decides, as the Job
// controller itself decides which pods are a Job's. A pod outside the chain
// is not the job's: not for its status, its diagnosis, its network check,
// nor for exec-rank, top or describe. pods is not modified; when every pod
// is the job's, as it is but for a planted pod, pods itself is returned
// rather than a copy of each pod of a large job.
func OwnPods(tj, jobSet metav1.Object, jobs []metav1.Object, pods []corev1.Pod) []corev1.Pod {
	if jobSet == nil || !metav1.IsControlledBy(jobSet, tj) {
		return nil
	}
	own := make(map[types.UID]bool, len(jobs))
	for _, j := range jobs {
		if metav1.IsControlledBy(j, jobSet) {
			own[j.GetUID()] = true
		}
	}
	isOwn := func(p *corev1.Pod) bool {
		c := metav1.GetControllerOfNoCopy(p)
		return c != nil && c.Kind == "Job" && c.APIVersion == "batch/v1" && own[c.UID]
	}
	first := 0
	for first < len(pods) && isOwn(&pods[first]) {
		first++
	}
	if first == len(pods) {
		return pods
	}
	out := make([]corev1.Pod, first, len(pods)-1)
	copy(out, pods[:first])
	for i := first + 1; i < len(pods); i++ {
		if isOwn(&pods[i]) {
			out = append(out, pods[i])
		}
	}
	return out
}
