package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// realRuns is how many jobs each contender runs on the real nodes; the
// floor's and the contender's alternate, one job at a time.
const realRuns = 10

// localRuntime is the runtime test/localcluster installs for the real nodes
// (-real-node): Torus's Open MPI sample with the image built there.
const localRuntime = "torus-openmpi-local"

// initProbe is what the ranks run: each notes the wall clock once mpi4py's
// import has run MPI_Init, and rank 0 prints the latest. The nodes share
// the benchmark's clock (one machine), so creation → every rank past
// MPI_Init is read from the ranks themselves, not from pod phases.
const initProbe = `import time
from mpi4py import MPI
t = time.time()
ts = MPI.COMM_WORLD.gather(t, root=0)
if MPI.COMM_WORLD.Get_rank() == 0:
    print("all ranks past MPI_Init at %.6f" % max(ts))`

var pastInit = regexp.MustCompile(`all ranks past MPI_Init at (\d+\.\d+)`)

// realContender is what reconciles the measured jobs, and how a job is
// asked of it.
type realContender struct {
	label   string
	runtime string
	command []string
	// image and annotations, when set, are the job's own.
	image       string
	annotations map[string]string
}

// torusContenders run the jobs on Torus's Open MPI runtime: through the
// image's OpenSSH, and through Torus's launch agent on the same image with
// every OpenSSH package purged (test/localcluster's mpi-nossh): at the
// operator's defaults (auto: the image volume where the nodes mount one, as
// the real nodes do), brought by an init container, run from that image,
// which holds it too, or run from Torus's image mounted as an image volume.
var torusContenders = []realContender{{
	label:       "Torus, OpenSSH (" + localRuntime + ")",
	runtime:     localRuntime,
	command:     []string{"mpirun", "-n", "4", "python3", "-c", initProbe},
	annotations: map[string]string{api.AnnotationRemoteLaunch: api.RemoteLaunchOpenSSH},
},
	agentContender("Torus, launch agent at the operator's defaults ("+localRuntime+", no OpenSSH in the image)", nil),
	agentContender("Torus, launch agent by init container ("+localRuntime+", no OpenSSH in the image)",
		map[string]string{api.AnnotationLaunchAgentDelivery: api.LaunchAgentByInitContainer}),
	agentContender("Torus, launch agent from the image ("+localRuntime+", no OpenSSH, torus-launch in the image)",
		map[string]string{api.AnnotationLaunchAgentPath: "/usr/local/bin/torus-launch"}),
	agentContender("Torus, launch agent from Torus's image as an image volume ("+localRuntime+", no OpenSSH)",
		map[string]string{api.AnnotationLaunchAgentDelivery: api.LaunchAgentByImageVolume}),
}

// agentContender is a job of the launch agent on mpi-nossh with the
// annotations that say how the agent reaches its pods.
func agentContender(label string, delivery map[string]string) realContender {
	annotations := map[string]string{api.AnnotationRemoteLaunch: api.RemoteLaunchAgent}
	maps.Copy(annotations, delivery)
	return realContender{
		label:       label,
		runtime:     localRuntime,
		command:     []string{"mpirun", "-n", "4", "python3", "-c", initProbe},
		image:       "registry.torus.local/mpi-nossh:1",
		annotations: annotations,
	}
}

// realTimes are one contender's measures, a job each.
type realTimes struct {
	running, pastInit, complete []time.Duration
	phases                      []phaseClock
}

// runReal alternates, realRuns times, a job of the floor and one of each
// contender on the real nodes, each alone on them: the floor is the same
// pods as a plain JobSet (floorJobSet), timed from creation until all its
// pods run, once as they are and once with an init container each; a
// contender's 2-worker Open MPI job is timed until its
// launcher and workers run together, until every rank is past MPI_Init
// (initProbe), and until it is Complete. Pods are polled every 50 ms,
// which one job's few objects make cheap.
func runReal(ctx context.Context, c client.Client, cs kubernetes.Interface, ns string, rcs []realContender) error {
	var local trainer.ClusterTrainingRuntime
	if err := c.Get(ctx, client.ObjectKey{Name: localRuntime}, &local); err != nil {
		return fmt.Errorf("reading %s, which test/localcluster -real-node installs: %w", localRuntime, err)
	}
	var floor, floorInit realTimes
	contenders := make([]realTimes, len(rcs))
	for i := range realRuns {
		for _, f := range []struct {
			name  string
			init  bool
			times *realTimes
		}{{"floor", false, &floor}, {"floor-init", true, &floorInit}} {
			js := floorJobSet(ns, fmt.Sprintf("%s-%02d", f.name, i), &local, f.init)
			start := time.Now()
			if err := c.Create(ctx, js); err != nil {
				return fmt.Errorf("creating %s: %w", js.Name, err)
			}
			pc := phaseClock{}
			d, err := untilAllRunning(ctx, c, ns, js.Name, 3, start, nil, pc)
			if err != nil {
				return err
			}
			f.times.running = append(f.times.running, d)
			f.times.phases = append(f.times.phases, pc)
			if err := deleteAndDrain(ctx, c, ns, js); err != nil {
				return err
			}
		}

		for j, rc := range rcs {
			if err := runContenderJob(ctx, c, cs, ns, fmt.Sprintf("real-%d-%02d", j, i), rc, &contenders[j]); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "benche2e: start, round %d of %d done\n", i+1, realRuns)
	}
	fmt.Printf("| %d jobs each, 2 workers × 2 ranks, alternating | creation → all pods Running, p50 | p95 | creation → every rank past MPI_Init, p50 | p95 | creation → Complete, p50 | p95 |\n", realRuns)
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	fmt.Printf("| floor: the same pods as a plain JobSet | %.2f s | %.2f s | | | | |\n", pct(floor.running, 50).Seconds(), pct(floor.running, 95).Seconds())
	fmt.Printf("| the floor with one init container per pod | %.2f s | %.2f s | | | | |\n", pct(floorInit.running, 50).Seconds(), pct(floorInit.running, 95).Seconds())
	for j, rc := range rcs {
		t := contenders[j]
		fmt.Printf("| %s | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s |\n", rc.label,
			pct(t.running, 50).Seconds(), pct(t.running, 95).Seconds(),
			pct(t.pastInit, 50).Seconds(), pct(t.pastInit, 95).Seconds(),
			pct(t.complete, 50).Seconds(), pct(t.complete, 95).Seconds())
	}
	base := pct(floor.running, 50).Seconds()
	fmt.Println("\nAgainst the floor's all pods Running (p50):")
	for j, rc := range rcs {
		fmt.Printf("- %s: all pods Running %.2f×, every rank past MPI_Init %.2f×.\n", rc.label,
			pct(contenders[j].running, 50).Seconds()/base, pct(contenders[j].pastInit, 50).Seconds()/base)
	}
	fmt.Printf("- the floor with one init container per pod: all pods Running %.2f×.\n", pct(floorInit.running, 50).Seconds()/base)
	labels := []string{"floor", "floor, one init container per pod"}
	clocks := [][]phaseClock{floor.phases, floorInit.phases}
	for j, rc := range rcs {
		labels = append(labels, rc.label)
		clocks = append(clocks, contenders[j].phases)
	}
	printPhases(labels, clocks)
	return nil
}

// runContenderJob runs one job of the contender and records its times.
func runContenderJob(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, name string, rc realContender, t *realTimes) error {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: rc.annotations},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: rc.runtime},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To[int32](2),
				Command: rc.command,
			},
		},
	}
	if rc.image != "" {
		tj.Spec.Trainer.Image = ptr.To(rc.image)
	}
	start := time.Now()
	if err := c.Create(ctx, tj); err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	// Running together, unless the job completes first: then the poll was
	// too slow to see it, which is an error of the benchmark.
	ended := func() error {
		complete, err := finished(ctx, c, tj)
		if err == nil && complete {
			err = fmt.Errorf("%s completed before its launcher and workers were seen Running together: poll faster", name)
		}
		return err
	}
	pc := phaseClock{}
	running, err := untilAllRunning(ctx, c, ns, name, 3, start, ended, pc)
	if err != nil {
		return err
	}
	for {
		if time.Since(start) > 3*time.Minute {
			return fmt.Errorf("%s did not complete in 3 minutes", name)
		}
		complete, err := finished(ctx, c, tj)
		if err != nil {
			return err
		}
		if complete {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	complete := time.Since(start)
	at, err := launcherPastInit(ctx, c, cs, ns, name)
	if err != nil {
		return err
	}
	t.running = append(t.running, running)
	t.pastInit = append(t.pastInit, at.Sub(start))
	pc.see("every rank past MPI_Init", at.Sub(start))
	t.phases = append(t.phases, pc)
	t.complete = append(t.complete, complete)
	return deleteAndDrain(ctx, c, ns, tj)
}

// finished reads a job and reports whether it is Complete, or an error
// when it failed.
func finished(ctx context.Context, c client.Client, tj *trainer.TrainJob) (bool, error) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
		return false, err
	}
	if cond := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); cond != nil && cond.Status == metav1.ConditionTrue {
		return false, fmt.Errorf("%s failed: %s", tj.Name, cond.Message)
	}
	return meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), nil
}

// untilAllRunning polls the pods of a JobSet until it has want Running at
// once (a launcher and its workers), or ended reports the job's end; pc,
// when given, notes the steps of the start on the way.
func untilAllRunning(ctx context.Context, c client.Client, ns, name string, want int, start time.Time, ended func() error, pc phaseClock) (time.Duration, error) {
	limit, poll := podsLimit(want), podsPoll(want)
	for {
		if time.Since(start) > limit {
			return 0, fmt.Errorf("%s's pods were not all Running within %s", name, limit)
		}
		var pods corev1.PodList
		at := time.Since(start)
		if pc != nil {
			if err := pc.observeJobSet(ctx, c, ns, name, at); err != nil {
				return 0, err
			}
		}
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
			return 0, err
		}
		if pc != nil {
			pc.observe(pods.Items, at)
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		if n == want {
			return time.Since(start), nil
		}
		if ended != nil {
			if err := ended(); err != nil {
				return 0, err
			}
		}
		time.Sleep(poll)
	}
}

// podsLimit is how long a job of pods may take to start on the real
// nodes, two kubelets sharing the machine's cores: 3 minutes, and 4 s more
// for each pod (a pod of a job of hundreds, with an init container, takes
// about 3 s of those kubelets' time).
func podsLimit(pods int) time.Duration { return 3*time.Minute + time.Duration(pods)*4*time.Second }

// podsPoll is how often a job of pods is polled: every 50 ms, or less
// often where listing its pods would load the API server, which shares
// the cores with the job: a list of a few pods is cheap, one of hundreds
// is not.
func podsPoll(pods int) time.Duration {
	return max(50*time.Millisecond, time.Duration(pods)*2*time.Millisecond)
}

// launcherPastInit reads, from the launcher's output, when the last rank
// was past MPI_Init.
func launcherPastInit(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, name string) (time.Time, error) {
	out, err := launcherOutput(ctx, c, cs, ns, name)
	if err != nil {
		return time.Time{}, err
	}
	return unixTime(pastInit, out, "its ranks past MPI_Init")
}

// launcherOutput is the output of a job's one launcher pod.
func launcherOutput(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, name string) ([]byte, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{
		jobsetv1alpha2.JobSetNameKey: name, jobsetv1alpha2.ReplicatedJobNameKey: mpi.LauncherJob,
	}); err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("%s has %d launcher pods, want 1", name, len(pods.Items))
	}
	out, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s's launcher output: %w", name, err)
	}
	return out, nil
}

// floorJobSet is the floor: the local runtime's launcher and 2 workers as
// a plain JobSet, created at once, with no start order, no SSH setup and
// no probes, each container sleeping; same image, placement and node as
// the contenders' pods. With init, each pod first runs one init container
// that does nothing (true, from the same image): the least a pod that
// prepares anything before its main container costs the kubelet.
func floorJobSet(ns, name string, rt *trainer.ClusterTrainingRuntime, init bool) *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       *rt.Spec.Template.Spec.DeepCopy(),
	}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		rj.DependsOn = nil
		rj.Replicas = 1
		pods := int32(1)
		if rj.Name == mpi.NodeJob {
			pods = 2
		}
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = ptr.To(pods), ptr.To(pods)
		ps := &rj.Template.Spec.Template.Spec
		ps.InitContainers = nil
		for j := range ps.Containers {
			ctr := &ps.Containers[j]
			ctr.Command, ctr.Args = []string{"sleep", "600"}, nil
			ctr.StartupProbe, ctr.ReadinessProbe, ctr.LivenessProbe = nil, nil, nil
		}
		if init {
			ps.InitContainers = []corev1.Container{{
				Name: "init", Image: ps.Containers[0].Image, ImagePullPolicy: ps.Containers[0].ImagePullPolicy,
				Command: []string{"true"}, SecurityContext: ps.Containers[0].SecurityContext.DeepCopy(),
			}}
		}
	}
	return js
}

// deleteAndDrain deletes a job and waits until the namespace has no pod,
// so that the next job starts on empty nodes.
func deleteAndDrain(ctx context.Context, c client.Client, ns string, obj client.Object) error {
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		return err
	}
	// Whether any pod is left is one pod's metadata: a list of every pod of
	// a job of thousands, five times a second, would load the API server
	// the benchmark measures next.
	for {
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := c.List(ctx, pods, client.InNamespace(ns), client.Limit(1)); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}
