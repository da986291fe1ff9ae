package run

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// jobTotal is what a job's pods ask for together.
func jobTotal(sets []podSet) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, ps := range sets {
		for name, per := range ps.Requests {
			need := per.DeepCopy()
			need.Mul(int64(ps.Count))
			add(total, name, need)
		}
	}
	return total
}

// sortedNames are a resource list's names, in order.
func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n, q := range l {
		if !q.IsZero() {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// fitNow says what a job asks against what its ClusterQueue has free now
// (its quota less what admitted and reserving workloads hold) and how many
// workloads wait before it: the job is queued either way, this only says
// whether it will wait. Kueue places a pod set in one flavor, so a resource
// counts as free for the job as far as one flavor has it; a queue in a
// cohort may borrow, or have lent, so its verdict is never definite.
func fitNow(cq *kueue.ClusterQueue, sets []podSet) string {
	total := jobTotal(sets)
	names := sortedNames(total)
	quota := map[kueue.ResourceFlavorReference]corev1.ResourceList{}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			if quota[fq.Name] == nil {
				quota[fq.Name] = corev1.ResourceList{}
			}
			for _, rq := range fq.Resources {
				add(quota[fq.Name], rq.Name, rq.NominalQuota)
			}
		}
	}
	held := map[kueue.ResourceFlavorReference]corev1.ResourceList{}
	for _, fu := range cq.Status.FlavorsReservation {
		held[fu.Name] = corev1.ResourceList{}
		for _, ru := range fu.Resources {
			add(held[fu.Name], ru.Name, ru.Total)
		}
	}
	var asks, free, short []string
	for _, n := range names {
		covered := false
		var all, best resource.Quantity
		for flavor, q := range quota {
			nominal, ok := q[n]
			if !ok {
				continue
			}
			covered = true
			left := nominal.DeepCopy()
			left.Sub(held[flavor][n])
			if left.Sign() < 0 {
				left = resource.Quantity{}
			}
			all.Add(left)
			if left.Cmp(best) > 0 {
				best = left
			}
		}
		if !covered {
			continue
		}
		need := total[n]
		asks = append(asks, need.String()+" "+string(n))
		free = append(free, all.String()+" "+string(n))
		if need.Cmp(best) > 0 {
			short = append(short, string(n))
		}
	}
	msg := fmt.Sprintf("the job asks %s in all; ClusterQueue %q has %s free now", strings.Join(asks, ", "), cq.Name, strings.Join(free, ", "))
	if len(asks) == 0 {
		msg = fmt.Sprintf("the job asks for nothing ClusterQueue %q counts", cq.Name)
	}
	if p := cq.Status.PendingWorkloads; p > 0 {
		msg += fmt.Sprintf(", and %d workload(s) wait in it", p)
	}
	switch {
	case cq.Spec.CohortName != "":
		msg += fmt.Sprintf(": it shares quota in cohort %q, so whether it waits depends on the other queues", cq.Spec.CohortName)
	case len(short) > 0:
		msg += fmt.Sprintf(": it will wait in the queue until %s is freed", strings.Join(short, " and "))
	case cq.Status.PendingWorkloads > 0:
		msg += ": it may wait behind them"
	default:
		msg += ": it fits now"
	}
	return msg
}

// quotaRoom says, for each ResourceQuota of the namespace a job's pods
// would exceed now, what it has left against what the pods ask: the API
// server refuses the pods beyond it (the job waits with QuotaExceeded).
func quotaRoom(ctx context.Context, c client.Reader, ns string, sets []podSet) []string {
	var quotas corev1.ResourceQuotaList
	if err := c.List(ctx, &quotas, client.InNamespace(ns)); err != nil {
		return nil // not the user's to read: the API server says so when it refuses
	}
	return overQuota(quotas.Items, ns, sets)
}

// overQuota is quotaRoom's reading of the quotas, as the API server keeps
// their use.
func overQuota(quotas []corev1.ResourceQuota, ns string, sets []podSet) []string {
	total := jobTotal(sets)
	pods := int64(0)
	for _, ps := range sets {
		pods += int64(ps.Count)
	}
	var out []string
	for _, q := range quotas {
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			// Whether a scoped quota counts the pods depends on them
			// (priority, best effort): the API server says when it does.
			continue
		}
		var over []string
		for hard, limit := range q.Status.Hard {
			var need resource.Quantity
			switch {
			case hard == corev1.ResourcePods:
				need = *resource.NewQuantity(pods, resource.DecimalSI)
			case strings.HasPrefix(string(hard), "requests."):
				need = total[corev1.ResourceName(strings.TrimPrefix(string(hard), "requests."))]
			case hard == corev1.ResourceCPU || hard == corev1.ResourceMemory:
				need = total[hard]
			default:
				continue
			}
			if need.IsZero() {
				continue
			}
			left := limit.DeepCopy()
			left.Sub(q.Status.Used[hard])
			if need.Cmp(left) > 0 {
				over = append(over, fmt.Sprintf("%s: the job asks %s, %s of %s is left", hard, need.String(), left.String(), limit.String()))
			}
		}
		if len(over) > 0 {
			sort.Strings(over)
			out = append(out, fmt.Sprintf("ResourceQuota %q of namespace %s would refuse some of the job's pods now (%s): they wait with QuotaExceeded until room is freed", q.Name, ns, strings.Join(over, "; ")))
		}
	}
	sort.Strings(out)
	return out
}
