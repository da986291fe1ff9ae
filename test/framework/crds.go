package framework

import (
	"context"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServedCRD serves a kind of another project (OpenShift's console and AI,
// the Prometheus Operator) under its real group, names, version and scope,
// its schema left open.
func ServedCRD(group, version, kind, plural string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
}

// DiscoveryMapper maps kinds as the API server serves them now; Reset makes
// it see kinds served since.
func (f *Framework) DiscoveryMapper() *restmapper.DeferredDiscoveryRESTMapper {
	ginkgo.GinkgoHelper()
	dc, err := discovery.NewDiscoveryClientForConfig(f.Config)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

// Serve installs CRDs for the spec, deleted when it ends, and returns once
// every one of them is Established and mapper, a DiscoveryMapper, maps
// every kind they serve: the operator's installers make a single attempt
// in tests, and a command reads the kinds through discovery, so each kind
// must be served before they start.
func (f *Framework) Serve(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, crds ...*apiextensionsv1.CustomResourceDefinition) {
	ginkgo.GinkgoHelper()
	s := k8sruntime.NewScheme()
	gomega.Expect(apiextensionsv1.AddToScheme(s)).To(gomega.Succeed())
	c, err := client.New(f.Config, client.Options{Scheme: s})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, crd := range crds {
		gomega.Expect(c.Create(ctx, crd)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func(ctx context.Context) {
			gomega.Expect(client.IgnoreNotFound(c.Delete(ctx, crd))).To(gomega.Succeed())
		})
	}
	for _, crd := range crds {
		gomega.Eventually(func(g gomega.Gomega) {
			var got apiextensionsv1.CustomResourceDefinition
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(crd), &got)).To(gomega.Succeed())
			g.Expect(got.Status.Conditions).To(gomega.ContainElement(gomega.And(
				gomega.HaveField("Type", apiextensionsv1.Established),
				gomega.HaveField("Status", apiextensionsv1.ConditionTrue))), "CRD %s is not established", crd.Name)
		}, Timeout, Interval).Should(gomega.Succeed())
	}
	gomega.Eventually(func(g gomega.Gomega) {
		mapper.Reset()
		for _, crd := range crds {
			gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
			_, err := mapper.RESTMapping(gk, crd.Spec.Versions[0].Name)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "discovery does not serve %s yet", gk)
		}
	}, Timeout, Interval).Should(gomega.Succeed())
}
