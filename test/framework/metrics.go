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
