package run

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestFitNow(t *testing.T) {
	q := resource.MustParse
	cq := func(gpus string, used string, pending int32) *kueue.ClusterQueue {
		c := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
		c.Spec.ResourceGroups = []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
			Flavors: []kueue.FlavorQuotas{{Name: "a100", Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: q(gpus)}}}}}}
		c.Status.FlavorsReservation = []kueue.FlavorUsage{{Name: "a100", Resources: []kueue.ResourceUsage{{Name: "nvidia.com/gpu", Total: q(used)}}}}
		c.Status.PendingWorkloads = pending
		return c
	}
	sets := []podSet{{Name: "launcher", Count: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}},
		{Name: "node", Count: 2, Requests: corev1.ResourceList{"nvidia.com/gpu": q("4")}}}
	tests := []struct {
		name string
		cq   *kueue.ClusterQueue
		want string
	}{
		{"room now", cq("16", "4", 0), `the job asks 8 nvidia.com/gpu in all; ClusterQueue "team" has 12 nvidia.com/gpu free now: it fits now`},
		{"short now", cq("16", "12", 2), `the job asks 8 nvidia.com/gpu in all; ClusterQueue "team" has 4 nvidia.com/gpu free now, and 2 workload(s) wait in it: it will wait in the queue until nvidia.com/gpu is freed`},
		{"room, others waiting", cq("16", "0", 1), `the job asks 8 nvidia.com/gpu in all; ClusterQueue "team" has 16 nvidia.com/gpu free now, and 1 workload(s) wait in it: it may wait behind them`},
	}
	// Free quota split over two flavors does not hold a pod set that needs
	// it in one.
	split := cq("4", "0", 0)
	split.Spec.ResourceGroups[0].Flavors = append(split.Spec.ResourceGroups[0].Flavors,
		kueue.FlavorQuotas{Name: "h100", Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: q("4")}}})
	if got, want := fitNow(split, sets), `the job asks 8 nvidia.com/gpu in all; ClusterQueue "team" has 8 nvidia.com/gpu free now: it will wait in the queue until nvidia.com/gpu is freed`; got != want {
		t.Errorf("split over flavors: %q, want %q", got, want)
	}
	cohort := cq("16", "0", 0)
	cohort.Spec.CohortName = "org"
	if got := fitNow(cohort, sets); !strings.HasSuffix(got, `: it shares quota in cohort "org", so whether it waits depends on the other queues`) {
		t.Errorf("in a cohort: %q", got)
	}
	nothing := []podSet{{Name: "node", Count: 2, Requests: corev1.ResourceList{}}}
	if got, want := fitNow(cq("16", "0", 3), nothing), `the job asks for nothing ClusterQueue "team" counts, and 3 workload(s) wait in it: it may wait behind them`; got != want {
		t.Errorf("a job that asks nothing: %q, want %q", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, fitNow(tt.cq, sets)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestOverQuota(t *testing.T) {
	q := resource.MustParse
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "ns"},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"requests.cpu": q("8"), corev1.ResourcePods: q("10"), "requests.memory": q("64Gi")},
			Used: corev1.ResourceList{"requests.cpu": q("6"), corev1.ResourcePods: q("3"), "requests.memory": q("1Gi")},
		}}
	sets := []podSet{{Name: "node", Count: 4, Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")}}}
	scoped := rq.DeepCopy()
	scoped.Name, scoped.Spec.Scopes = "best-effort", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
	want := []string{`ResourceQuota "team" of namespace ns would refuse some of the job's pods now (requests.cpu: the job asks 4, 2 of 8 is left): they wait with QuotaExceeded until room is freed`}
	if diff := cmp.Diff(want, overQuota([]corev1.ResourceQuota{*rq, *scoped}, "ns", sets)); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
