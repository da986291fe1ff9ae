package controller

import (
	"context"
	"errors"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// Metrics of the TrainJob controller, registered with controller-runtime's
// registry and served on the manager's metrics endpoint.
type Metrics struct {
	Created         *prometheus.CounterVec
	Running         *prometheus.CounterVec
	Succeeded       *prometheus.CounterVec
	Failed          *prometheus.CounterVec
	TimeToAdmission *prometheus.HistogramVec
	TimeToRunning   *prometheus.HistogramVec
	Duration        *prometheus.HistogramVec
	KeyRotations    *prometheus.CounterVec
	Restarts        *prometheus.CounterVec
	ReconcileErrors *prometheus.CounterVec
}

// NewMetrics creates the controller's metrics; Register adds them to a
// registry.
func NewMetrics() *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "torus", Name: name, Help: help}, append([]string{"namespace"}, labels...))
	}
	// Seconds to hours: queueing, start-up and whole runs alike.
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "torus", Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(0.5, 2, 18),
		}, append([]string{"namespace"}, labels...))
	}
	return &Metrics{
		Created:         counter("trainjobs_created_total", "MPI TrainJobs whose JobSet Torus created."),
		Running:         counter("trainjobs_running_total", "MPI TrainJobs that reached Running."),
		Succeeded:       counter("trainjobs_succeeded_total", "MPI TrainJobs that completed."),
		Failed:          counter("trainjobs_failed_total", "MPI TrainJobs that failed, by cause: the first failing pod's (OOMKilled, Error, SSHConnectionRefused, CUDAOutOfMemory, NCCLError, PythonException, ...), or the Failed condition's reason (DeadlineExceeded, SchedulingTimeout, NetworkNotReady, Failed).", "reason"),
		TimeToAdmission: histogram("trainjob_time_to_admission_seconds", "Seconds from an MPI TrainJob's creation to Kueue's admission."),
		TimeToRunning:   histogram("trainjob_time_to_running_seconds", "Seconds from an MPI TrainJob's creation to Running."),
		Duration:        histogram("trainjob_duration_seconds", "Seconds from an MPI TrainJob's creation to its end, by result (Succeeded or Failed).", "result"),
		KeyRotations:    counter("ssh_key_rotations_total", "SSH key Secrets made with new keys after the job's JobSet was created: for a restarted or resumed run, or a queued job whose quota Kueue reserved."),
		Restarts:        counter("trainjob_restarts_total", "Restarts of MPI TrainJobs' worlds, by reason: WorldLost (a pod lost to something other than the program: not counted against the job's budget), ProgramFailed (counted), Evicted (Kueue evicted the running job: not counted), or Unknown.", "reason"),
		ReconcileErrors: counter("reconcile_errors_total", "TrainJob reconciles that returned an error."),
	}
}

// Register adds the metrics to controller-runtime's registry, in place of
// those of an earlier start-up attempt of this process (register).
func (m *Metrics) Register() error {
	for _, c := range []prometheus.Collector{m.Created, m.Running, m.Succeeded, m.Failed, m.TimeToAdmission,
		m.TimeToRunning, m.Duration, m.KeyRotations, m.Restarts, m.ReconcileErrors} {
		if err := register(c); err != nil {
			return err
		}
	}
	return nil
}

// register adds c to controller-runtime's registry, replacing a collector
// of the same metrics. The operator builds its manager again when the API
// server fails a start-up request, and the attempt that failed may have
// registered its own metrics already: they belong to a manager that never
// starts (the job counts read its cache), so the new attempt's take their
// place rather than failing the start.
func register(c prometheus.Collector) error {
	err := metrics.Registry.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if !errors.As(err, &dup) {
		return err
	}
	metrics.Registry.Unregister(dup.ExistingCollector)
	return metrics.Registry.Register(c)
}

// succeeded records a job that completed at now.
func (m *Metrics) succeeded(tj *trainer.TrainJob, now time.Time) {
	m.Succeeded.WithLabelValues(tj.Namespace).Inc()
	m.Duration.WithLabelValues(tj.Namespace, "Succeeded").Observe(now.Sub(tj.CreationTimestamp.Time).Seconds())
}

// failed records a job that failed at now for reason.
func (m *Metrics) failed(tj *trainer.TrainJob, reason string, now time.Time) {
	m.Failed.WithLabelValues(tj.Namespace, reason).Inc()
	m.Duration.WithLabelValues(tj.Namespace, "Failed").Observe(now.Sub(tj.CreationTimestamp.Time).Seconds())
}

// jobsCollector counts MPI TrainJobs by namespace and state at each scrape,
// from the manager's cache: no API request, and a count that is right after
// an operator restart, which counters are not.
type jobsCollector struct {
	reader        client.Reader
	desc, stalled *prometheus.Desc
	// Per running job that reports its progress (status.trainerStatus):
	// as many series as jobs running.
	progress, left, reported *prometheus.Desc
	now                      func() time.Time
}

func newJobsCollector(reader client.Reader) *jobsCollector {
	return &jobsCollector{reader: reader,
		desc: prometheus.NewDesc("torus_trainjobs",
			"MPI TrainJobs by namespace and state: the phase kubectl mpi shows (trainjob.StateOf).",
			[]string{"namespace", "state"}, nil),
		stalled: prometheus.NewDesc("torus_trainjobs_stalled",
			"Running MPI TrainJobs that are probably stuck, by namespace: their launcher's output ended in a rank's failure and has been quiet since (condition Stalled).",
			[]string{"namespace"}, nil),
		progress: prometheus.NewDesc("torus_trainjob_progress_percent",
			"A running MPI TrainJob's progress as its program last reported it (status.trainerStatus.progressPercentage).",
			[]string{"namespace", "name"}, nil),
		left: prometheus.NewDesc("torus_trainjob_remaining_seconds",
			"A running MPI TrainJob's time left by its program's last estimate, counted down since it reported it.",
			[]string{"namespace", "name"}, nil),
		reported: prometheus.NewDesc("torus_trainjob_progress_reported_timestamp_seconds",
			"When a running MPI TrainJob's program last reported its progress: time() minus this is how long it has been silent.",
			[]string{"namespace", "name"}, nil),
		now: time.Now}
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.desc, c.stalled, c.progress, c.left, c.reported} {
		ch <- d
	}
}

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list trainer.TrainJobList
	if err := c.reader.List(ctx, &list, client.HasLabels{api.LabelImplementation}); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[[2]string]int{}
	stalled := map[string]int{}
	for i := range list.Items {
		tj := &list.Items[i]
		st := trainjob.StateOf(tj)
		counts[[2]string{tj.Namespace, st.Phase}]++
		if st.Stalled != "" {
			stalled[tj.Namespace]++
		}
		if rep := trainerstatus.Of(tj); rep != nil && st.Phase == trainjob.PhaseRunning {
			if p := rep.ProgressPercentage; p != nil {
				ch <- prometheus.MustNewConstMetric(c.progress, prometheus.GaugeValue, float64(*p), tj.Namespace, tj.Name)
			}
			if left, ok := trainerstatus.Left(rep, c.now()); ok {
				ch <- prometheus.MustNewConstMetric(c.left, prometheus.GaugeValue, left.Seconds(), tj.Namespace, tj.Name)
			}
			if !rep.LastUpdatedTime.IsZero() {
				ch <- prometheus.MustNewConstMetric(c.reported, prometheus.GaugeValue, float64(rep.LastUpdatedTime.Unix()), tj.Namespace, tj.Name)
			}
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for ns, n := range stalled {
		ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.GaugeValue, float64(n), ns)
	}
}
