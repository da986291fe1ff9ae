// Command benche2e measures, on the local cluster (make cluster-up), how
// long MPI jobs take from TrainJob creation until Kueue admitted them and
// until every pod (launcher and workers) runs: one job of 1, 8 and 64
// workers, then 50 jobs of 4 workers submitted at once.
//
//	go run ./hack/benche2e -kubeconfig .cluster/kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/operator/mpi"
	"github.com/torus-mpi/torus/operator/scheme"
	"github.com/torus-mpi/torus/operator/trainjob"
	"github.com/torus-mpi/torus/samples"
)

type result struct {
	jobSet, admitted, running time.Duration
}

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one.
	fs := flag.NewFlagSet("benche2e", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", ".cluster/kubeconfig", "the local cluster's kubeconfig")
	_ = fs.Parse(os.Args[1:])
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("bench-%d", time.Now().Unix())
	if err := setup(ctx, c, ns); err != nil {
		return err
	}
	defer func() { _ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) }()

	fmt.Println("| scenario | creation → JobSet | creation → admitted | creation → all pods Running |")
	fmt.Println("| --- | --- | --- | --- |")
	for _, workers := range []int32{1, 8, 64} {
		res, err := measure(ctx, c, ns, []string{fmt.Sprintf("w%d", workers)}, workers)
		if err != nil {
			return err
		}
		fmt.Printf("| 1 job, %d workers | %.2f s | %.2f s | %.2f s |\n", workers, res[0].jobSet.Seconds(), res[0].admitted.Seconds(), res[0].running.Seconds())
	}
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("c%02d", i)
	}
	res, err := measure(ctx, c, ns, names, 4)
	if err != nil {
		return err
	}
	js, adm, runn := make([]time.Duration, len(res)), make([]time.Duration, len(res)), make([]time.Duration, len(res))
	for i, r := range res {
		js[i], adm[i], runn[i] = r.jobSet, r.admitted, r.running
	}
	for _, p := range []int{50, 95, 100} {
		label := fmt.Sprintf("p%d", p)
		if p == 100 {
			label = "max"
		}
		fmt.Printf("| 50 concurrent jobs × 4 workers, %s | %.2f s | %.2f s | %.2f s |\n", label, pct(js, p).Seconds(), pct(adm, p).Seconds(), pct(runn, p).Seconds())
	}
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := (len(s)*p + 99) / 100
	return s[max(idx-1, 0)]
}

// setup makes a namespace, a queue with room for everything measured, and
// a runtime whose launcher runs for an hour, so that "all pods Running" is
// a state that lasts.
func setup(ctx context.Context, c client.Client, ns string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "bench-flavor"}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, flavor)); err != nil {
		return err
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
				Flavors: []kueue.FlavorQuotas{{Name: "bench-flavor", Resources: []kueue.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("1000")},
				}}},
			}},
		},
	}
	if err := c.Create(ctx, cq); err != nil {
		return err
	}
	if err := c.Create(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(ns)}}); err != nil {
		return err
	}
	rt, err := samples.Runtime("torus-openmpi")
	if err != nil {
		return err
	}
	rt.Name = "bench-openmpi"
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template
		pod.Annotations = map[string]string{"torus-mpi.io/kwok-run-duration": "1h"}
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, rt))
}

// measure creates the jobs at once and times each to admission and to all
// pods Running, then deletes them.
func measure(ctx context.Context, c client.Client, ns string, names []string, workers int32) ([]result, error) {
	starts := make([]time.Time, len(names))
	for i, n := range names {
		tj := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, Labels: map[string]string{mpi.KueueQueueLabel: "bench"}},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: "bench-openmpi"},
				Trainer: &trainer.Trainer{NumNodes: ptr.To(workers), ResourcesPerNode: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				}},
			},
		}
		// Each job is timed from its own creation request.
		starts[i] = time.Now()
		if err := c.Create(ctx, tj); err != nil {
			return nil, fmt.Errorf("creating %s: %w", n, err)
		}
	}
	results := make([]result, len(names))
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := wait(ctx, c, ns, n, workers+1, starts[i])
			results[i] = r
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	for _, n := range names {
		_ = c.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
	// Let the pods go before the next scenario.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err == nil && len(pods.Items) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return results, nil
}

func wait(ctx context.Context, c client.Client, ns, name string, pods int32, start time.Time) (result, error) {
	var r result
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if r.jobSet == 0 {
			var js jobsetv1alpha2.JobSet
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &js); err == nil {
				r.jobSet = time.Since(start)
			}
		}
		if r.admitted == 0 {
			var tj trainer.TrainJob
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err == nil &&
				meta.IsStatusConditionTrue(tj.Status.Conditions, trainjob.ConditionAdmitted) {
				r.admitted = time.Since(start)
			}
		}
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{mpi.LabelJobName: name}); err == nil {
			running := int32(0)
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running == pods {
				r.running = time.Since(start)
				if r.admitted == 0 {
					r.admitted = r.running
				}
				return r, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r, fmt.Errorf("%s: not all %d pods running after 5 minutes", name, pods)
}
