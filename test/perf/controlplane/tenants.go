package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	plugclient "github.com/torus-mpi/torus/plugin/client"
	plugjob "github.com/torus-mpi/torus/plugin/job"
	"github.com/torus-mpi/torus/test/perf/answers"
)

// The tenants benchmark measures what one namespace's user can make the
// operator hold and do, which every namespace's admission depends on: a
// flood of that user's objects carrying Torus's job-name label (large
// ConfigMaps and Secrets, then many small ConfigMaps), and one large job
// whose pods all exist. Torus runs alone, at its defaults, on a fresh
// control plane; the figures are the operator's live heap after a forced
// garbage collection (its pprof endpoint's runtime.MemStats), its resident
// memory (RssAnon) and its CPU seconds (/proc).

const nsTenant = "bench-tenant"

// memory is the operator's memory at one moment.
type memory struct {
	Live int64 // bytes reachable after a forced GC (HeapAlloc)
	RSS  int64 // RssAnon
	CPU  float64
}

// mib1 is a size in MiB to a tenth.
func mib1(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (m memory) String() string {
	return fmt.Sprintf("live heap %s, RSS %s", mib1(m.Live), mib1(m.RSS))
}

// tenantStep is one line of the report.
type tenantStep struct {
	What    string
	Objects int
	Bytes   int64
	After   memory
	// Took is how long the operator worked through the step's events
	// (CPU seconds, until its CPU time stood still).
	CPU float64
	// RunCPU is, for a job's pods, the operator's CPU seconds while each
	// of them turned Running and ready.
	RunCPU float64
	// Answers are, for the largest job, how soon the plugin and the
	// dashboard answered about it once every pod ran.
	Answers []answers.Answer
}

func runTenants(ctx context.Context, o options, podSizes []int) error {
	bins, crds, err := prepare(o)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.work, "tenants")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	m := describeMachine()
	logf("%s; load average %s", m.CPU, m.LoadStart)
	cp, proxy, mc, stop, err := startBare(ctx, dir, o.testbin, crds, o.placement)
	if err != nil {
		return err
	}
	defer stop()
	if err := cp.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsTenant}}); err != nil {
		return err
	}
	// No controller manager runs to make it; the API server admits no pod
	// without its service account.
	if err := cp.client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: nsBig}}); err != nil {
		return err
	}
	var torus contender
	for _, c := range allContenders {
		if c.Name == "torus" {
			torus = c
		}
	}
	ctrl, err := startContender(ctx, torus, bins, cp, proxy, dir, true, o.torusFlags)
	if err != nil {
		return err
	}
	defer ctrl.stop()
	jobSetIn := func(name string) (time.Duration, error) {
		t := newTracker(nsWarmup, 1, false)
		tctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := t.start(tctx, mc); err != nil {
			return 0, err
		}
		if err := (&creator{c: cp.client, concurrency: 1}).one(ctx, t, name, o.workers); err != nil {
			return 0, err
		}
		d, err := waitJob(ctx, t, name)
		if err != nil {
			return 0, fmt.Errorf("%w (log: %s)", err, ctrl.proc.Log)
		}
		return d, nil
	}
	if _, err := jobSetIn("warmup"); err != nil {
		return err
	}
	measureNow := func() (memory, error) {
		settle(ctrl)
		live, err := liveHeap(ctx, ctrl.pprof)
		if err != nil {
			return memory{}, err
		}
		u := usageOf(ctrl)
		return memory{Live: live, RSS: u.RSSAnon, CPU: u.CPU}, nil
	}
	base, err := measureNow()
	if err != nil {
		return err
	}
	logf("tenants: at rest, %s", base)
	var steps []tenantStep
	step := func(what string, n int, bytes int64, create func(i int) client.Object) error {
		before := usageOf(ctrl).CPU
		if err := createAll(ctx, cp.client, o.concurrency, n, create); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		after, err := measureNow()
		if err != nil {
			return err
		}
		steps = append(steps, tenantStep{What: what, Objects: n, Bytes: bytes, After: after, CPU: after.CPU - before})
		logf("tenants: after %s: %s", what, after)
		return nil
	}
	const big = 900 << 10 // a ConfigMap or Secret may hold 1 MiB
	payload := strings.Repeat("x", big)
	labelled := func(kind string, i int) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", kind, i), Namespace: nsTenant, Labels: map[string]string{api.LabelJobName: fmt.Sprintf("flood-%d", i)},
			Annotations: map[string]string{"note": strings.Repeat("y", 100<<10)}}
	}
	if err := step("96 ConfigMaps of 1 MiB (900 KiB data, 100 KiB annotation) labelled as a job's", 96, 96<<20, func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: labelled("big", i), Data: map[string]string{"data": payload}}
	}); err != nil {
		return err
	}
	if err := step("96 Secrets of 1 MiB labelled as a job's", 96, 96<<20, func(i int) client.Object {
		return &corev1.Secret{ObjectMeta: labelled("big", i), Data: map[string][]byte{"data": []byte(payload)}}
	}); err != nil {
		return err
	}
	if err := step("10,000 empty ConfigMaps labelled as a job's", 10000, 0, func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("small-%d", i), Namespace: nsTenant, Labels: map[string]string{api.LabelJobName: "flood"}}}
	}); err != nil {
		return err
	}
	// The worst case of each kind the operator caches: what the API server
	// accepts at its largest.
	if err := cp.client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: nsTenant}}); err != nil {
		return err
	}
	for _, w := range worstCases {
		one := w.make(0)
		if err := step(fmt.Sprintf("%d %s at their worst (%d KiB each) labelled as a job's", worstCount, w.kind, sizeOf(one)>>10), worstCount, int64(worstCount)*sizeOf(one), w.make); err != nil {
			return err
		}
	}
	answered, err := jobSetIn("after-flood")
	if err != nil {
		return err
	}
	logf("tenants: a job created after the flood had its JobSet in %v", answered)

	// One job's pods: the operator's status, diagnosis and network check
	// read every pod of a job on every event of one of them.
	kubeconfig, err := directKubeconfig(cp, dir)
	if err != nil {
		return err
	}
	var pods []tenantStep
	for i, n := range podSizes {
		var ask func(string) ([]answers.Answer, error)
		if i == len(podSizes)-1 {
			ask = func(name string) ([]answers.Answer, error) {
				return askAbout(ctx, bins.plugin, kubeconfig, nsBig, name)
			}
		}
		s, err := jobPods(ctx, o, cp, ctrl, mc, n, ask, measureNow)
		if err != nil {
			return err
		}
		pods = append(pods, s)
		logf("tenants: %s: %s, %.1f s CPU, %.1f s CPU while they turned Running", s.What, s.After, s.CPU, s.RunCPU)
	}
	text := tenantsReport(o, m, base, steps, answered, pods)
	fmt.Println()
	fmt.Print(text)
	if o.out != "" {
		out := filepath.Join(filepath.Dir(o.out), "tenants.md")
		if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
			return err
		}
		logf("wrote %s", out)
	}
	return nil
}

// jobPods creates a job of n workers, the Job its JobSet's controller would
// make for them (no JobSet controller runs here) and n pods of that Job, as
// the Job controller makes them and bound to nodes as the scheduler binds
// them, then reports each pod Running and ready as its kubelet would (no
// node runs them). With ask, the last size, it then counts the Job's ready
// pods as the Job controller would and asks about the job; the control
// plane goes with the benchmark.
func jobPods(ctx context.Context, o options, cp *controlPlane, ctrl *running, mc metadata.Interface, n int, ask func(string) ([]answers.Answer, error), measureNow func() (memory, error)) (tenantStep, error) {
	name := fmt.Sprintf("pods-%d", n)
	t := newTracker(nsBig, 1, false)
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := t.start(tctx, mc); err != nil {
		return tenantStep{}, err
	}
	if err := (&creator{c: cp.client, concurrency: 1}).one(ctx, t, name, int32(n)); err != nil {
		return tenantStep{}, err
	}
	if _, err := waitJob(ctx, t, name); err != nil {
		return tenantStep{}, err
	}
	var js jobsetv1alpha2.JobSet
	if err := cp.client.Get(ctx, client.ObjectKey{Namespace: nsBig, Name: name}, &js); err != nil {
		return tenantStep{}, err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + mpi.NodeJob + "-0", Namespace: nsBig,
			Labels:          map[string]string{jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.ReplicatedJobNameKey: mpi.NodeJob},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&js, jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"))}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "node", Image: "mpi"}},
		}}},
	}
	// Its counts and indexes as the JobSet controller gives them.
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == mpi.NodeJob {
			t := rj.Template.Spec
			job.Spec.Completions, job.Spec.Parallelism, job.Spec.CompletionMode = t.Completions, t.Parallelism, t.CompletionMode
		}
	}
	if err := cp.client.Create(ctx, job); err != nil {
		return tenantStep{}, err
	}
	// The pod as the JobSet's template makes it, so that the operator
	// holds what it would hold of a real one.
	template := js.Spec.ReplicatedJobs[len(js.Spec.ReplicatedJobs)-1].Template.Spec.Template
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == mpi.NodeJob {
			template = rj.Template.Spec.Template
		}
	}
	podName := func(i int) string { return fmt.Sprintf("%s-%s-0-%d-abcde", name, mpi.NodeJob, i) }
	before := usageOf(ctrl).CPU
	err := createAll(ctx, cp.client, o.concurrency, n, func(i int) client.Object {
		p := &corev1.Pod{ObjectMeta: *template.ObjectMeta.DeepCopy(), Spec: *template.Spec.DeepCopy()}
		p.Name, p.Namespace = podName(i), nsBig
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%160)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(i)
		p.Labels[jobsetv1alpha2.JobSetNameKey] = js.Name
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
		// What the admission plugins would default; the API server
		// refuses a pod without them.
		for i := range p.Spec.InitContainers {
			p.Spec.InitContainers[i].TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}
		return p
	})
	if err != nil {
		return tenantStep{}, fmt.Errorf("pods of %s: %w", name, err)
	}
	after, err := measureNow()
	if err != nil {
		return tenantStep{}, err
	}
	step := tenantStep{What: fmt.Sprintf("one job's %d pods", n), Objects: n, After: after, CPU: after.CPU - before}
	// Then each pod starts, as its kubelet reports it: every change
	// brings the job back, and each reconcile reads all of its pods.
	before = after.CPU
	running := runningStatus(&template.Spec)
	err = runAll(o.concurrency, n, func(i int) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(i), Namespace: nsBig}}
		return cp.client.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, running))
	})
	if err != nil {
		return tenantStep{}, fmt.Errorf("starting the pods of %s: %w", name, err)
	}
	if after, err = measureNow(); err != nil {
		return tenantStep{}, err
	}
	step.After, step.RunCPU = after, after.CPU-before
	if ask != nil {
		job.Status.Active, job.Status.Ready = int32(n), ptr.To(int32(n))
		if err := cp.client.Status().Update(ctx, job); err != nil {
			return tenantStep{}, fmt.Errorf("counting the ready pods of %s: %w", name, err)
		}
		step.Answers, err = ask(name)
		return step, err
	}
	// The next size starts from none. A collection delete of thousands of
	// pods may outlast the API server's request timeout and go on after
	// it answers: wait until none is left.
	if err := cp.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(nsBig), client.GracePeriodSeconds(0)); err != nil && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
		return tenantStep{}, err
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		var left metav1.PartialObjectMetadataList
		left.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := cp.client.List(ctx, &left, client.InNamespace(nsBig), client.Limit(1)); err != nil {
			return false, nil
		}
		return len(left.Items) == 0, nil
	}); err != nil {
		return tenantStep{}, fmt.Errorf("deleting the pods of %s: %w", name, err)
	}
	if err := cp.client.Delete(ctx, job); err != nil {
		return tenantStep{}, err
	}
	return step, nil
}

// askAbout times, on the job of name whose every pod runs, describe and the
// dashboard's view of it, and, inside one process, the two reads of its
// pods they may make: every pod whole (job.Pods), and a glance at them
// (job.GlancePods), which describe and the dashboard make.
func askAbout(ctx context.Context, plugin, kubeconfig, ns, name string) ([]answers.Answer, error) {
	out := []answers.Answer{answers.Tries("describe", answers.Plugin(ctx, plugin, kubeconfig, "describe", name, "-n", ns))}
	view, stop, err := answers.DashboardView(kubeconfig, ns, name)
	if err != nil {
		return nil, err
	}
	defer stop()
	out = append(out, answers.Tries("dashboard job view", view))
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	getter := plugclient.New(flags)
	c, err := getter.Client()
	if err != nil {
		return nil, err
	}
	kube, err := getter.Kubernetes()
	if err != nil {
		return nil, err
	}
	var tj trainer.TrainJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
		return nil, err
	}
	out = append(out, answers.Tries("every pod read whole", func() error {
		_, err := plugjob.Pods(ctx, c, &tj)
		return err
	}))
	out = append(out, answers.Tries("a glance at the pods", func() error {
		g, err := plugjob.GlancePods(ctx, c, plugjob.NewPodTables(kube), &tj)
		// Every pod runs: the launcher and one worker are read whole,
		// for the facts of their roles, and no other.
		if err == nil && len(g.Pods) != 2 {
			err = fmt.Errorf("the glance read %d pods whole, where every pod runs", len(g.Pods))
		}
		return err
	}))
	return out, nil
}

// createAll creates n objects from concurrency goroutines.
func createAll(ctx context.Context, c client.Client, concurrency, n int, newObject func(i int) client.Object) error {
	return runAll(concurrency, n, func(i int) error { return c.Create(ctx, newObject(i)) })
}

// runningStatus is the status a kubelet reports of a started pod of spec,
// as a merge patch: its init containers done, its containers running and
// ready.
func runningStatus(spec *corev1.PodSpec) []byte {
	now := metav1.Now()
	st := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, c := range spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}}})
	}
	for _, c := range spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		panic(err) // a PodStatus always encodes
	}
	return patch
}

// runAll does n pieces of work from concurrency goroutines, and returns
// the first error.
func runAll(concurrency, n int, do func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := do(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// settle waits until the operator's CPU time stands still for two seconds:
// it has worked through the events it was sent.
func settle(r *running) {
	last := usageOf(r).CPU
	for still := 0; still < 4; {
		time.Sleep(500 * time.Millisecond)
		now := usageOf(r).CPU
		if now-last < 0.02 {
			still++
		} else {
			still = 0
		}
		last = now
	}
}

// liveHeap forces a garbage collection in the operator and returns the heap
// left (runtime.MemStats.HeapAlloc) from its pprof endpoint.
func liveHeap(ctx context.Context, addr string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?debug=1&gc=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return 0, fmt.Errorf("no HeapAlloc in the operator's heap profile: %v", sc.Err())
}

func tenantsReport(o options, m machine, base memory, steps []tenantStep, answered time.Duration, pods []tenantStep) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# What one tenant costs the operator\n\n")
	fmt.Fprintf(&b, "Machine: %s. Torus at its defaults on a fresh etcd and kube-apiserver on 127.0.0.1; `go run ./test/perf/controlplane -tenants` (`make bench-tenants`).\n\n", m.CPU)
	fmt.Fprintf(&b, "Live heap: bytes reachable after a forced garbage collection; RSS: the operator's anonymous resident memory.\n\n")
	fmt.Fprintf(&b, "| a user creates, in one namespace | live heap | RSS | operator CPU |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&b, "| (nothing: the operator at rest) | %s | %s | |\n", mib1(base.Live), mib1(base.RSS))
	prev := base
	for _, s := range steps {
		per := ""
		if s.Objects > 0 {
			per = fmt.Sprintf(" (%+d B per object)", (s.After.Live-prev.Live)/int64(s.Objects))
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s | %.1f s |\n", s.What, mib1(s.After.Live), per, mib1(s.After.RSS), s.CPU)
		prev = s.After
	}
	fmt.Fprintf(&b, "\nObjects \"at their worst\" carry every field a user may write filled as far as the API server accepts (test/perf/controlplane/worst.go). Each informer's watch decodes into a buffer as large as the largest object it has seen, so a few MiB of each step is that buffer and the garbage collector's timing, not what the cache keeps: per-object figures within a few hundred KB of zero are that noise. What each transform keeps of a kind at its worst is bounded in TestCacheTransformsAtTheirWorst (operator/controller/cache_test.go).\n")
	fmt.Fprintf(&b, "\nA TrainJob created after the flood had its JobSet in %.2f s.\n\n", answered.Seconds())
	fmt.Fprintf(&b, "## One job's pods\n\nA job of N workers whose N pods all exist, created from its JobSet's template as the Job controller would, then each reported Running and ready as a kubelet reports it (no node runs them: the benchmark writes their status, %d at a time); the figures after the operator worked through their events.\n\n", o.concurrency)
	fmt.Fprintf(&b, "| pods | live heap | RSS | operator CPU while they were created | operator CPU while they turned Running |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range pods {
		fmt.Fprintf(&b, "| %d | %s | %s | %.1f s | %.1f s |\n", s.Objects, mib1(s.After.Live), mib1(s.After.RSS), s.CPU, s.RunCPU)
	}
	if len(pods) >= 2 {
		first, last := pods[0], pods[len(pods)-1]
		dn := float64(last.Objects - first.Objects)
		fmt.Fprintf(&b, "\nSlope between %d and %d pods: %.1f MiB of live heap, %.2f s of CPU while created and %.2f s while turning Running per 1,000 pods.\n",
			first.Objects, last.Objects, float64(last.After.Live-first.After.Live)/(1<<20)/dn*1000, (last.CPU-first.CPU)/dn*1000, (last.RunCPU-first.RunCPU)/dn*1000)
	}
	if len(pods) > 0 && len(pods[len(pods)-1].Answers) > 0 {
		last := pods[len(pods)-1]
		fmt.Fprintf(&b, "\n## Answers about the job of %d pods\n\nOnce each pod ran and its Job counted them ready, as the Job controller counts them: how long each answer took, the median of 3, straight to the API server. `describe` is the plugin's binary; the dashboard's view is its server's reply to the job page; the two reads are the ones they may make of the pods, timed inside one process.\n\n| answer | time |\n| --- | --- |\n", last.Objects)
		for _, a := range last.Answers {
			if a.Err != "" {
				fmt.Fprintf(&b, "| %s | failed: %s |\n", a.What, a.Err)
				continue
			}
			fmt.Fprintf(&b, "| %s | %.2f s |\n", a.What, a.Median.Seconds())
		}
	}
	return b.String()
}

// runTenantsIn runs the tenants benchmark from the repository's root, in a
// work directory kept on failure, as run does for the contenders.
func runTenantsIn(ctx context.Context, o options, podSizes []int) (err error) {
	done, err := enterWork(&o)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	return runTenants(ctx, o, podSizes)
}

// waitJob waits until the tracker has seen every object of one job, and
// returns how long they took from its creation.
func waitJob(ctx context.Context, t *tracker, name string) (time.Duration, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		t.mu.Lock()
		jt, ok := t.jobs[name]
		done := ok && t.hasAll(jt) && !jt.created.IsZero()
		var d time.Duration
		if done {
			d = jt.done().Sub(jt.created)
		}
		t.mu.Unlock()
		if done {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("job %s: its objects did not all appear in 2 minutes", name)
}
