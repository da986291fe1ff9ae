package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// phaseClock notes when each step of one job's start was first seen, from
// the job's creation. Steps are read from the same 50 ms polls that time
// the whole start, so each is known to within a poll; pod and container
// timestamps in the API have a resolution of a second, too coarse here.
type phaseClock map[string]time.Duration

// roleSizes is how many pods each replicated job of the measured jobs
// has: one launcher, two workers.
var roleSizes = map[string]int{mpi.LauncherJob: 1, mpi.NodeJob: 2}

// roleNames are the roles as the tables print them.
var roleNames = map[string]string{mpi.LauncherJob: "launcher", mpi.NodeJob: "workers"}

func (pc phaseClock) see(step string, at time.Duration) {
	if _, ok := pc[step]; !ok {
		pc[step] = at
	}
}

// observeJobSet notes when the job's JobSet exists and when it is no
// longer suspended (Kueue admitted the job).
func (pc phaseClock) observeJobSet(ctx context.Context, c client.Client, ns, name string, at time.Duration) error {
	if _, ok := pc["JobSet unsuspended (admitted)"]; ok {
		return nil
	}
	var js jobsetv1alpha2.JobSet
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	pc.see("JobSet created", at)
	if !ptr.Deref(js.Spec.Suspend, false) {
		pc.see("JobSet unsuspended (admitted)", at)
	}
	return nil
}

// observe notes, for each role whose pods all exist, which steps all of
// them have passed: scheduled, each init container done, Running, Ready.
func (pc phaseClock) observe(pods []corev1.Pod, at time.Duration) {
	byRole := map[string][]corev1.Pod{}
	for _, p := range pods {
		role := p.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
		byRole[role] = append(byRole[role], p)
	}
	for role, ps := range byRole {
		if len(ps) != roleSizes[role] {
			continue
		}
		who := roleNames[role]
		pc.see(who+": pods created", at)
		all := func(ok func(corev1.Pod) bool) bool {
			for _, p := range ps {
				if !ok(p) {
					return false
				}
			}
			return true
		}
		if all(func(p corev1.Pod) bool { return hasCondition(p, corev1.PodScheduled) }) {
			pc.see(who+": scheduled", at)
		}
		for _, ic := range ps[0].Spec.InitContainers {
			if all(func(p corev1.Pod) bool { return initDone(p, ic.Name) }) {
				pc.see(who+": init container "+ic.Name+" done", at)
			}
		}
		if all(func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }) {
			pc.see(who+": Running", at)
		}
		if all(func(p corev1.Pod) bool { return hasCondition(p, corev1.PodReady) }) {
			pc.see(who+": Ready", at)
		}
	}
}

func hasCondition(p corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func initDone(p corev1.Pod, name string) bool {
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == name {
			return s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
		}
	}
	return false
}

// printPhases prints each step's p50 for the floor and each contender,
// in the order the first contender passes them; a step a job does not
// have is blank.
func printPhases(labels []string, clocks [][]phaseClock) {
	steps := map[string]bool{}
	medians := make([]map[string]time.Duration, len(clocks))
	for i, runs := range clocks {
		medians[i] = map[string]time.Duration{}
		byStep := map[string][]time.Duration{}
		for _, pc := range runs {
			for s, d := range pc {
				byStep[s] = append(byStep[s], d)
				steps[s] = true
			}
		}
		for s, ds := range byStep {
			medians[i][s] = pct(ds, 50)
		}
	}
	order := make([]string, 0, len(steps))
	for s := range steps {
		order = append(order, s)
	}
	// By the latest contender's median, then the floor's: each contender
	// has steps the floor lacks.
	at := func(s string) time.Duration {
		for i := len(medians) - 1; i >= 0; i-- {
			if d, ok := medians[i][s]; ok {
				return d
			}
		}
		return 0
	}
	sort.SliceStable(order, func(a, b int) bool {
		if at(order[a]) != at(order[b]) {
			return at(order[a]) < at(order[b])
		}
		return order[a] < order[b]
	})
	fmt.Printf("\n| step, from creation (p50) | %s |\n", strings.Join(labels, " | "))
	fmt.Printf("| --- |%s\n", strings.Repeat(" --- |", len(labels)))
	for _, s := range order {
		row := []string{s}
		for i := range medians {
			if d, ok := medians[i][s]; ok {
				row = append(row, fmt.Sprintf("%.2f s", d.Seconds()))
			} else {
				row = append(row, "")
			}
		}
		fmt.Printf("| %s |\n", strings.Join(row, " | "))
	}
}
