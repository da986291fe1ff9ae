package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
)

// scaleRuns is how many jobs each case of the launch and training
// sections runs, one after another.
const scaleRuns = 3

// launcherStarted is what a launcher prints first: when its main
// container started, by the clock the nodes share with the benchmark.
const launcherStarted = `date +"launcher started at %s.%N"; `

var startedAt = regexp.MustCompile(`launcher started at (\d+\.\d+)`)

// scaleJob is one job of the launch or training sections.
type scaleJob struct {
	runtime, image, launch string
	workers, slots         int32
	// script is the launcher's shell command, after launcherStarted.
	script string
	env    []corev1.EnvVar
}

// runScaleJob runs a job to completion and returns when its pods were all
// Running and the launcher's output.
func runScaleJob(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, name string, j scaleJob) (running time.Duration, created time.Time, out []byte, err error) {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{api.AnnotationRemoteLaunch: j.launch}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: j.runtime},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To(j.workers), NumProcPerNode: ptr.To(j.slots),
				Command: []string{"sh", "-c", launcherStarted + j.script},
				Env:     j.env,
			},
		},
	}
	if j.image != "" {
		tj.Spec.Trainer.Image = ptr.To(j.image)
	}
	created = time.Now()
	if err := c.Create(ctx, tj); err != nil {
		return 0, created, nil, fmt.Errorf("creating %s: %w", name, err)
	}
	ended := func() error {
		complete, err := finished(ctx, c, tj)
		if err == nil && complete {
			err = fmt.Errorf("%s completed before its pods were seen Running together: poll faster", name)
		}
		return err
	}
	if running, err = untilAllRunning(ctx, c, ns, name, int(j.workers)+1, created, ended, nil); err != nil {
		return 0, created, nil, err
	}
	pods := int(j.workers) + 1
	limit := podsLimit(pods) + 2*time.Minute
	for {
		if time.Since(created) > limit {
			return 0, created, nil, fmt.Errorf("%s did not complete in %s", name, limit)
		}
		complete, err := finished(ctx, c, tj)
		if err != nil {
			return 0, created, nil, err
		}
		if complete {
			break
		}
		time.Sleep(podsPoll(pods))
	}
	if out, err = launcherOutput(ctx, c, cs, ns, name); err != nil {
		return 0, created, nil, err
	}
	return running, created, out, deleteAndDrain(ctx, c, ns, tj)
}

// unixTime reads the first submatch of re in out as seconds since the
// epoch.
func unixTime(re *regexp.Regexp, out []byte, what string) (time.Time, error) {
	m := re.FindSubmatch(out)
	if m == nil {
		return time.Time{}, fmt.Errorf("the launcher did not report %s:\n%s", what, out)
	}
	secs, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, int64(secs*1e9)), nil
}

// launchCases are the launch section's jobs: 16 workers of one rank each,
// Open MPI 4 and MPICH, through each remote launch.
var launchCases = []struct {
	label string
	job   scaleJob
	// ranks is the launcher's command: the image's MPI launcher and a
	// program. The bookworm image's ranks run initProbe; the trixie image
	// has no Python, and its MPICH ranks run pi over 200,000 intervals, a
	// few milliseconds' work. Debian has MPICH's launcher there as
	// mpiexec.mpich.
	ranks string
}{
	{"Open MPI 4.1, OpenSSH", scaleJob{runtime: localRuntime, launch: api.RemoteLaunchOpenSSH}, `mpirun -n 16 python3 -c "$PROBE"`},
	{"Open MPI 4.1, launch agent", scaleJob{runtime: localRuntime, image: "registry.torus.local/mpi-nossh:1", launch: api.RemoteLaunchAgent}, `mpirun -n 16 python3 -c "$PROBE"`},
	{"MPICH 4.2, OpenSSH", scaleJob{runtime: "torus-mpich-local", launch: api.RemoteLaunchOpenSSH}, "mpiexec.mpich -n 16 /opt/torus/pi-mpich 200000"},
	{"MPICH 4.2, launch agent", scaleJob{runtime: "torus-mpich-local", image: "registry.torus.local/mpi-trixie-nossh:1", launch: api.RemoteLaunchAgent}, "mpiexec.mpich -n 16 /opt/torus/pi-mpich 200000"},
}

// launcherDone is what a launcher prints once its MPI launcher returned.
var launcherDone = regexp.MustCompile(`launcher done at (\d+\.\d+)`)

// launchHosts is how many hosts the launch section's jobs span.
const launchHosts = 16

// runLaunchAtScale times, for jobs of launchHosts workers × 1 rank, the
// launcher's start to every rank past MPI_Init (initProbe, where the image
// has Python) and to its MPI launcher's return, and creation to all pods
// Running.
func runLaunchAtScale(ctx context.Context, c client.Client, cs kubernetes.Interface, ns string) error {
	fmt.Printf("\n| %d jobs each, %d workers × 1 rank | launcher's start → every rank past MPI_Init, p50 | runs | launcher's start → the MPI launcher returned, p50 | runs | creation → all pods Running, p50 |\n", scaleRuns, launchHosts)
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	for i, lc := range launchCases {
		j := lc.job
		j.workers, j.slots = launchHosts, 1
		j.env = []corev1.EnvVar{{Name: "PROBE", Value: initProbe}}
		j.script = lc.ranks + `; s=$?; date +"launcher done at %s.%N"; exit $s`
		var toInit, toDone, running []time.Duration
		for r := range scaleRuns {
			run, _, out, err := runScaleJob(ctx, c, cs, ns, fmt.Sprintf("launch-%d-%d", i, r), j)
			if err != nil {
				return err
			}
			started, err := unixTime(startedAt, out, "its start")
			if err != nil {
				return err
			}
			done, err := unixTime(launcherDone, out, "its MPI launcher's return")
			if err != nil {
				return err
			}
			if pastInit.Match(out) {
				at, err := unixTime(pastInit, out, "its ranks past MPI_Init")
				if err != nil {
					return err
				}
				toInit = append(toInit, at.Sub(started))
			}
			toDone = append(toDone, done.Sub(started))
			running = append(running, run)
		}
		initCells := "– | –"
		if len(toInit) > 0 {
			initCells = fmt.Sprintf("%.2f s | %s", pct(toInit, 50).Seconds(), seconds(toInit))
		}
		fmt.Printf("| %s | %s | %.2f s | %s | %.2f s |\n", lc.label, initCells, pct(toDone, 50).Seconds(), seconds(toDone), pct(running, 50).Seconds())
	}
	return nil
}

// trainProbe runs the reference training (/opt/torus/train.py) between two
// barriers, and rank 0 prints the time between them: the training alone,
// data loading included, without MPI's start.
const trainProbe = `import runpy, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
comm.Barrier()
t = time.time()
sys.argv = ["train.py"] + sys.argv[1:]
try:
    runpy.run_path("/opt/torus/train.py", run_name="__main__")
except SystemExit as e:
    if e.code:
        raise
comm.Barrier()
if comm.Get_rank() == 0:
    print("trained in %.6f s" % (time.time() - t))`

var trainedIn = regexp.MustCompile(`trained in (\d+\.\d+) s`)

// trainArgs make the reference training's compute outweigh its allreduce:
// a wide hidden layer on the same digits, a fixed number of epochs.
var trainArgs = []string{"--epochs", "20", "--hidden", "1024", "--batch", "1024"}

// runTrainingScaling times the reference training at 1, 2 and 4 ranks on
// the real nodes: 1 worker × 1 rank, 2 × 1 (one per node), 2 × 2. Each rank
// computes on one thread, so a rank is a core's worth of work.
func runTrainingScaling(ctx context.Context, c client.Client, cs kubernetes.Interface, ns string) error {
	shapes := []struct{ workers, slots int32 }{{1, 1}, {2, 1}, {2, 2}}
	fmt.Printf("\n| reference training (%s), %d jobs each | ranks | training time, p50 | runs | speedup | efficiency per rank |\n", strings.Join(trainArgs, " "), scaleRuns)
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	var base time.Duration
	for i, sh := range shapes {
		ranks := sh.workers * sh.slots
		j := scaleJob{runtime: localRuntime, launch: api.RemoteLaunchAgent, workers: sh.workers, slots: sh.slots,
			env: []corev1.EnvVar{
				{Name: "PROBE", Value: trainProbe},
				{Name: "OMP_NUM_THREADS", Value: "1"}, {Name: "OPENBLAS_NUM_THREADS", Value: "1"},
			},
			script: fmt.Sprintf(`exec mpirun -n %d python3 -c "$PROBE" %s`, ranks, strings.Join(trainArgs, " ")),
		}
		var took []time.Duration
		for r := range scaleRuns {
			_, _, out, err := runScaleJob(ctx, c, cs, ns, fmt.Sprintf("train-%d-%d", i, r), j)
			if err != nil {
				return err
			}
			m := trainedIn.FindSubmatch(out)
			if m == nil {
				return fmt.Errorf("the training did not report its time:\n%s", out)
			}
			secs, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				return err
			}
			took = append(took, time.Duration(secs*float64(time.Second)))
		}
		p50 := pct(took, 50)
		if i == 0 {
			base = p50
		}
		speedup := base.Seconds() / p50.Seconds()
		fmt.Printf("| | %d (%d × %d) | %.2f s | %s | %.2f× | %.0f %% |\n", ranks, sh.workers, sh.slots, p50.Seconds(), seconds(took), speedup, 100*speedup/float64(ranks))
	}
	return nil
}

// seconds lists durations in seconds, in the order measured.
func seconds(d []time.Duration) string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = fmt.Sprintf("%.2f", v.Seconds())
	}
	return strings.Join(s, ", ")
}
