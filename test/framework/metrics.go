package framework

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ReconcileCount reads controller-runtime's reconcile counter for a
// controller from the process's metrics registry.
func ReconcileCount(controllerName string) float64 {
	ginkgo.GinkgoHelper()
	families, err := metrics.Registry.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var total float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controllerName {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// MetricValue reads a metric of the process's registry by name and labels:
// a counter's or gauge's value, a histogram's count; 0 when no series has
// those labels.
func MetricValue(name string, labels map[string]string) float64 {
	ginkgo.GinkgoHelper()
	families, err := metrics.Registry.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}
