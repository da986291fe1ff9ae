package run

import (
	"fmt"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// podSet is a group of identical pods Kueue admits together: the launcher,
// or the workers.
type podSet struct {
	Name  string
	Count int32
	// Requests are one pod's.
	Requests corev1.ResourceList
}

// podSets are the pods a job asks Kueue for, with the requests the
// operator will give them: the runtime's containers, the TrainJob's
// resourcesPerNode on every container that runs ranks.
func podSets(tj *trainer.TrainJob, rt *mpi.Runtime, job *mpi.Job) []podSet {
	var perNode *corev1.ResourceRequirements
	if t := tj.Spec.Trainer; t != nil {
		perNode = t.ResourcesPerNode
	}
	var sets []podSet
	for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
		var count int32
		runsRanks := false
		switch rj.Name {
		case mpi.LauncherJob:
			count, runsRanks = 1, job.LauncherRunsRanks
		case mpi.NodeJob:
			count, runsRanks = job.Workers, true
		default:
			continue
		}
		req := corev1.ResourceList{}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			res := c.Resources
			if c.Name == mpi.TrainerContainer && runsRanks && perNode != nil {
				res = *perNode
			}
			addRequests(req, res)
		}
		sets = append(sets, podSet{Name: rj.Name, Count: count, Requests: req})
	}
	return sets
}

// addRequests adds a container's requests, taking limits where requests are
// not set, as the API server defaults them.
func addRequests(dst corev1.ResourceList, res corev1.ResourceRequirements) {
	for name, q := range res.Limits {
		if _, ok := res.Requests[name]; !ok {
			add(dst, name, q)
		}
	}
	for name, q := range res.Requests {
		add(dst, name, q)
	}
}

func add(dst corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := dst[name]
	sum.Add(q)
	dst[name] = sum
}

// neverFits says why a job can never be admitted by a ClusterQueue, or
// returns "" when it might be. Kueue admits a job only as a whole, each pod
// set within one flavor, so a job that needs more than a flavor's quota
// (plus what it may borrow), or more than all flavors together, or a
// resource the queue does not cover, waits forever.
func neverFits(cq *kueue.ClusterQueue, sets []podSet) string {
	type capacity struct {
		covered     bool
		maxFlavor   resource.Quantity
		total       resource.Quantity
		unlimited   bool
		flavorNames []string
	}
	caps := map[corev1.ResourceName]*capacity{}
	cohort := cq.Spec.CohortName != ""
	for _, rg := range cq.Spec.ResourceGroups {
		for _, name := range rg.CoveredResources {
			if caps[name] == nil {
				caps[name] = &capacity{}
			}
			caps[name].covered = true
		}
		for _, fq := range rg.Flavors {
			for _, rq := range fq.Resources {
				c := caps[rq.Name]
				if c == nil {
					c = &capacity{covered: true}
					caps[rq.Name] = c
				}
				limit := rq.NominalQuota.DeepCopy()
				if cohort {
					if rq.BorrowingLimit == nil {
						c.unlimited = true
					} else {
						limit.Add(*rq.BorrowingLimit)
					}
				}
				if limit.Cmp(c.maxFlavor) > 0 {
					c.maxFlavor = limit.DeepCopy()
				}
				c.total.Add(limit)
				c.flavorNames = append(c.flavorNames, string(fq.Name))
			}
		}
	}

	total := corev1.ResourceList{}
	var problems []string
	for _, ps := range sets {
		names := make([]string, 0, len(ps.Requests))
		for name := range ps.Requests {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, n := range names {
			name := corev1.ResourceName(n)
			per := ps.Requests[name]
			if per.IsZero() {
				continue
			}
			need := per.DeepCopy()
			need.Mul(int64(ps.Count))
			add(total, name, need)
			c := caps[name]
			if c == nil || !c.covered {
				problems = append(problems, fmt.Sprintf("%s request %s, which ClusterQueue %q does not cover", podSetWords(ps.Name), name, cq.Name))
				continue
			}
			if !c.unlimited && need.Cmp(c.maxFlavor) > 0 {
				problems = append(problems, fmt.Sprintf("%s need %s %s (%d × %s) but the largest flavor of ClusterQueue %q offers %s",
					podSetWords(ps.Name), need.String(), name, ps.Count, per.String(), cq.Name, c.maxFlavor.String()))
			}
		}
	}
	if len(problems) == 0 {
		names := make([]string, 0, len(total))
		for name := range total {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, n := range names {
			name := corev1.ResourceName(n)
			c := caps[name]
			need := total[name]
			if c != nil && !c.unlimited && need.Cmp(c.total) > 0 {
				problems = append(problems, fmt.Sprintf("the job needs %s %s in all but ClusterQueue %q has %s", need.String(), name, cq.Name, c.total.String()))
			}
		}
	}
	return strings.Join(problems, "; ")
}

func podSetWords(name string) string {
	if name == mpi.NodeJob {
		return "the workers"
	}
	return "the " + name
}
