package webhook_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/operator/monitoring"
	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/test/framework"
)

// The operator's ServiceMonitor and alerts, on an API server that serves
// the Prometheus Operator's kinds (namespaced, monitoring.coreos.com/v1).
var _ = Describe("ServiceMonitor and alerts", Ordered, func() {
	var mapper *restmapper.DeferredDiscoveryRESTMapper
	var ns string
	installer := func() *startup.Applier {
		a := monitoring.Installer(fw.Client, mapper, ns, GinkgoLogr)
		a.Backoff = wait.Backoff{Duration: 100 * time.Millisecond, Steps: 1}
		return a
	}
	get := func(kind, name string) *unstructured.Unstructured {
		GinkgoHelper()
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: kind})
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)).To(Succeed(), "%s %s", kind, name)
		return o
	}

	BeforeAll(func(sctx SpecContext) {
		mapper = fw.DiscoveryMapper()
		ns = fw.NewNamespace(sctx, "torus-system").Name
	})

	It("does nothing where the Prometheus Operator's API is not served", func() {
		Expect(installer().Runnable().Start(ctx)).To(Succeed())
	})

	It("scrapes the operator's metrics Service and loads its alerts, in the operator's namespace", func() {
		fw.Serve(ctx, mapper,
			framework.ServedCRD("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors", apiextensionsv1.NamespaceScoped),
			framework.ServedCRD("monitoring.coreos.com", "v1", "PrometheusRule", "prometheusrules", apiextensionsv1.NamespaceScoped))
		Expect(installer().Runnable().Start(ctx)).To(Succeed())

		sm := get("ServiceMonitor", monitoring.Name)
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		Expect(endpoints).To(ConsistOf(HaveKeyWithValue("port", monitoring.MetricsPort)))
		rule := get("PrometheusRule", monitoring.Name)
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		Expect(groups).To(HaveLen(1))
		rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
		Expect(rules).To(ContainElement(HaveKeyWithValue("alert", "TorusMPIJobsFailing")))

		By("applying again: nothing changes")
		before := rule.GetResourceVersion()
		Expect(installer().Install(ctx)).To(Succeed())
		Expect(get("PrometheusRule", monitoring.Name).GetResourceVersion()).To(Equal(before))
	})
})
