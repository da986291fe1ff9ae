package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/mpi"
	hackbrowser "github.com/torus-mpi/torus/test/browser"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// The dashboard benchmark measures how soon kubectl mpi dashboard shows a
// change in a real browser: from the moment a TrainJob's create (or its
// status write) returns to the moment its row (or its new state) is on the
// page, read by a MutationObserver in the page. The benchmark plays the
// operator (it writes the status itself), so the figure is the dashboard's
// own path: the API server's watch, the server-sent event, the page's
// reread of the list and React's render. It is measured with a namespace
// already holding each of -dashboard-jobs jobs, since the page rereads the
// whole list on each change.

const nsDashboard = "bench-dashboard"

// observer records, in the page, when each job's row first appears and
// when its state first reads Complete, in the epoch milliseconds Go's
// clock shares.
const observer = `(() => {
  window.__seen = {}; window.__complete = {};
  const look = () => {
    const now = performance.timeOrigin + performance.now();
    for (const tr of document.querySelectorAll('table[aria-label=Jobs] tbody tr')) {
      const name = tr.querySelector('td[data-label=Name]')?.innerText.trim();
      if (!name) continue;
      if (!(name in window.__seen)) window.__seen[name] = now;
      if (!(name in window.__complete) && tr.querySelector('td[data-label=State]')?.innerText.includes('Complete')) window.__complete[name] = now;
    }
  };
  new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true });
  look();
  return true;
})()`

type dashboardStep struct {
	Existing         int
	Create, Status   []time.Duration
	CreateN, StatusN int
}

func runDashboard(ctx context.Context, o options, existing []int, samples int) error {
	bins, crds, err := prepare(o)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.work, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	m := describeMachine()
	logf("%s; load average %s", m.CPU, m.LoadStart)
	cp, _, _, stop, err := startBare(ctx, dir, o.testbin, crds, o.placement)
	if err != nil {
		return err
	}
	defer stop()
	if err := cp.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsDashboard}}); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.writeKubeconfig(kubeconfig, fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort)); err != nil {
		return err
	}
	log := filepath.Join(dir, "dashboard.log")
	dash, err := supervisor.Start(supervisor.Spec{Name: "dashboard", Log: log,
		Argv: []string{bins.plugin, "--kubeconfig", kubeconfig, "-n", nsDashboard, "dashboard", "--open=false"}})
	if err != nil {
		return err
	}
	defer dash.Stop()
	url, err := dashboardURL(log, 30*time.Second)
	if err != nil {
		return err
	}
	browser, closeBrowser, err := hackbrowser.Start(ctx, filepath.Join(dir, "chromium"))
	if err != nil {
		return err
	}
	defer closeBrowser()
	bctx, cancel := context.WithTimeout(browser, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`table[aria-label=Jobs], .pf-v6-c-empty-state`))); err != nil {
		return fmt.Errorf("opening the dashboard: %w", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](observer)); err != nil {
		return fmt.Errorf("installing the observer: %w", err)
	}
	var steps []dashboardStep
	made := 0
	for _, n := range existing {
		if err := createAll(ctx, cp.client, o.concurrency, n-made, func(i int) client.Object {
			return dashboardJob(fmt.Sprintf("existing-%d", made+i))
		}); err != nil {
			return err
		}
		made = n
		// The page has read the list with them before the measure.
		time.Sleep(2 * time.Second)
		step := dashboardStep{Existing: n}
		for i := range samples {
			name := fmt.Sprintf("live-%d-%d", n, i)
			start := time.Now()
			tj := dashboardJob(name)
			if err := cp.client.Create(ctx, tj); err != nil {
				return err
			}
			d, err := seenAfter(browser, "__seen", name, start)
			if err != nil {
				return err
			}
			step.Create = append(step.Create, d)
			start = time.Now()
			meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Completed", Message: "The launcher completed"})
			if err := cp.client.Status().Update(ctx, tj); err != nil {
				return err
			}
			if d, err = seenAfter(browser, "__complete", name, start); err != nil {
				return err
			}
			step.Status = append(step.Status, d)
			time.Sleep(300 * time.Millisecond)
		}
		logf("dashboard: %d jobs: a new job shown after p50 %v; a state change after p50 %v", n, percentileOf(step.Create, 0.5), percentileOf(step.Status, 0.5))
		steps = append(steps, step)
	}
	text := dashboardReport(m, samples, steps)
	fmt.Println()
	fmt.Print(text)
	if o.out != "" {
		out := filepath.Join(filepath.Dir(o.out), "dashboard.md")
		if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
			return err
		}
		logf("wrote %s", out)
	}
	return nil
}

func dashboardJob(name string) *trainer.TrainJob {
	tj := mpi.NewTrainJob(name, nsDashboard)
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torus-openmpi", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](2)}
	return tj
}

// dashboardURL reads the URL the dashboard printed into its log.
func dashboardURL(log string, timeout time.Duration) (string, error) {
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if f, err := os.Open(log); err == nil {
			s := bufio.NewScanner(f)
			for s.Scan() {
				if u := re.FindString(s.Text()); u != "" {
					f.Close()
					return u, nil
				}
			}
			f.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("the dashboard printed no URL in %v; see %s", timeout, log)
}

// seenAfter waits until the page recorded name in its table, and returns
// how long after start that was.
func seenAfter(browser context.Context, table, name string, start time.Time) (time.Duration, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(browser, 10*time.Second)
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[*float64](fmt.Sprintf("window.%s[%q] ?? null", table, name)))
		cancel()
		if err != nil {
			return 0, err
		}
		if ms != nil {
			seen := time.UnixMicro(int64(*ms * 1000))
			return seen.Sub(start), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("job %s did not reach the page in 30 s", name)
}

func percentileOf(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return percentile(s, p)
}

func dashboardReport(m machine, samples int, steps []dashboardStep) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# How soon the dashboard shows a change\n\n")
	fmt.Fprintf(&b, "Machine: %s. kubectl mpi dashboard on a fresh etcd and kube-apiserver on 127.0.0.1, headless Chromium on the same machine; `make bench-dashboard`.\n\n", m.CPU)
	fmt.Fprintf(&b, "From the return of a TrainJob's create (or of its status write, as the operator's) to the page showing the row (or the new state), read in the page by a MutationObserver; %d changes at each size, one at a time. The benchmark writes the status itself: the figures are the dashboard's own path (watch, the server-sent event with the job's row, render), not the operator's.\n\n", samples)
	fmt.Fprintf(&b, "| jobs in the namespace | a new job shown: p50 | p95 | max | a state change shown: p50 | p95 | max |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	for _, s := range steps {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", s.Existing,
			ms(percentileOf(s.Create, 0.5)), ms(percentileOf(s.Create, 0.95)), ms(percentileOf(s.Create, 1)),
			ms(percentileOf(s.Status, 0.5)), ms(percentileOf(s.Status, 0.95)), ms(percentileOf(s.Status, 1)))
	}
	fmt.Fprintf(&b, "\nThe requirement (FR-OBS-006) is 10 s.\n")
	return b.String()
}
