package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the TrainJob controller, registered with controller-runtime's
// registry and served on the manager's metrics endpoint.
type Metrics struct {
	Created         *prometheus.CounterVec
	Running         *prometheus.CounterVec
	Succeeded       *prometheus.CounterVec
	Failed          *prometheus.CounterVec
	TimeToRunning   *prometheus.HistogramVec
	ReconcileErrors *prometheus.CounterVec
}

// NewMetrics creates the controller's metrics; Register adds them to a
// registry.
func NewMetrics() *Metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "torus", Name: name, Help: help}, []string{"namespace"})
	}
	return &Metrics{
		Created:   counter("trainjobs_created_total", "MPI TrainJobs whose JobSet Torus created."),
		Running:   counter("trainjobs_running_total", "MPI TrainJobs that reached Running."),
		Succeeded: counter("trainjobs_succeeded_total", "MPI TrainJobs that completed."),
		Failed:    counter("trainjobs_failed_total", "MPI TrainJobs that failed."),
		TimeToRunning: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "torus", Name: "trainjob_time_to_running_seconds",
			Help:    "Seconds from an MPI TrainJob's creation to Running.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
		}, []string{"namespace"}),
		ReconcileErrors: counter("reconcile_errors_total", "TrainJob reconciles that returned an error."),
	}
}

// Register adds the metrics to controller-runtime's registry. It is called
// once per process.
func (m *Metrics) Register() error {
	for _, c := range []prometheus.Collector{m.Created, m.Running, m.Succeeded, m.Failed, m.TimeToRunning, m.ReconcileErrors} {
		if err := metrics.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}
