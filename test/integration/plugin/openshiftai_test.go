package plugin_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/test/framework"
)

// OpenShift AI's DataScienceCluster (datasciencecluster.opendatahub.io/v2,
// cluster-scoped, its instance default-dsc), whose trainer component runs a
// Trainer controller of its own: doctor reads the component's state as the
// API server serves it.
var _ = Describe("doctor on OpenShift AI", func() {
	check := func() map[string]string {
		GinkgoHelper()
		r := kubectlMPI("", "doctor", "-o", "json")
		var results []map[string]string
		Expect(json.Unmarshal([]byte(r.Stdout), &results)).To(Succeed(), r.Stdout)
		for _, res := range results {
			if res["check"] == "OpenShift AI" {
				return res
			}
		}
		return nil
	}

	It("has nothing to say where OpenShift AI is not installed", func() {
		Expect(check()).To(BeNil())
	})

	It("says which DataScienceCluster runs OpenShift AI's Trainer controller, and how to remove it", func() {
		fw.Serve(ctx, fw.DiscoveryMapper(),
			framework.ServedCRD("datasciencecluster.opendatahub.io", "v2", "DataScienceCluster", "datascienceclusters", apiextensionsv1.ClusterScoped))
		dsc := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{"components": map[string]any{
				"trainer":   map[string]any{"managementState": "Managed"},
				"dashboard": map[string]any{"managementState": "Managed"},
			}},
		}}
		dsc.SetGroupVersionKind(schema.GroupVersionKind{Group: "datasciencecluster.opendatahub.io", Version: "v2", Kind: "DataScienceCluster"})
		dsc.SetName("default-dsc")
		Expect(fw.Client.Create(ctx, dsc)).To(Succeed())

		res := check()
		Expect(res).To(HaveKeyWithValue("status", "FAIL"))
		Expect(res["message"]).To(HavePrefix("DataScienceCluster default-dsc runs OpenShift AI's own Trainer controller (spec.components.trainer.managementState: Managed)"))
		Expect(res["fix"]).To(ContainSubstring(`oc patch datasciencecluster default-dsc --type merge -p '{"spec":{"components":{"trainer":{"managementState":"Removed"}}}}'`))

		By("applying the fix the check gives")
		patch := []byte(`{"spec":{"components":{"trainer":{"managementState":"Removed"}}}}`)
		Expect(fw.Client.Patch(ctx, dsc, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		res = check()
		Expect(res).To(HaveKeyWithValue("status", "PASS"))
		Expect(res["message"]).To(Equal("the trainer component of DataScienceCluster default-dsc (Removed) is not Managed, so Torus is the cluster's Trainer controller"))
	})
})
