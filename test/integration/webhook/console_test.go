package webhook_test

import (
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/operator/console"
	"github.com/torus-mpi/torus/operator/runtimes"
	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/pkg/version"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/framework"
)

// OpenShift's console objects, on an API server that serves the console's
// kinds as OpenShift does (cluster-scoped, console.openshift.io/v1).
var _ = Describe("OpenShift console samples and downloads", Ordered, func() {
	var mapper *restmapper.DeferredDiscoveryRESTMapper
	installer := func() *startup.Applier {
		a := console.Installer(fw.Client, mapper, "v0.1.0", GinkgoLogr)
		a.Backoff = wait.Backoff{Duration: 100 * time.Millisecond, Steps: 1}
		return a
	}

	BeforeAll(func() {
		mapper = fw.DiscoveryMapper()
	})

	It("does nothing where the console's API is not served", func() {
		Expect(installer().Runnable().Start(ctx)).To(Succeed())
	})

	It("offers a TrainJob sample per default runtime, each admitted as it is, and the plugin's archives", func(sctx SpecContext) {
		fw.Serve(ctx, mapper,
			framework.ServedCRD("console.openshift.io", "v1", "ConsoleYAMLSample", "consoleyamlsamples", apiextensionsv1.ClusterScoped),
			framework.ServedCRD("console.openshift.io", "v1", "ConsoleCLIDownload", "consoleclidownloads", apiextensionsv1.ClusterScoped))
		Expect(installer().Runnable().Start(ctx)).To(Succeed())

		// The samples' runtimes, as the operator installs them.
		rt := &runtimes.Installer{Client: fw.Client, Mapper: mapper, User: runtimes.UserPlatform, Log: GinkgoLogr}
		Expect(rt.Install(ctx)).To(Succeed())
		DeferCleanup(func() {
			for _, name := range samples.RuntimeNames() {
				err := fw.Client.Delete(ctx, &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name}})
				Expect(client.IgnoreNotFound(err)).To(Succeed())
			}
		})
		ns := fw.NewNamespace(sctx, "console")
		for _, name := range samples.TrainJobNames() {
			sample := &unstructured.Unstructured{}
			sample.SetGroupVersionKind(schema.GroupVersionKind{Group: "console.openshift.io", Version: "v1", Kind: "ConsoleYAMLSample"})
			Expect(fw.Client.Get(ctx, client.ObjectKey{Name: "torus-" + name}, sample)).To(Succeed())
			kind, _, _ := unstructured.NestedString(sample.Object, "spec", "targetResource", "kind")
			Expect(kind).To(Equal("TrainJob"))
			title, _, _ := unstructured.NestedString(sample.Object, "spec", "title")
			Expect(title).NotTo(BeEmpty())
			text, _, _ := unstructured.NestedString(sample.Object, "spec", "yaml")
			var tj trainer.TrainJob
			Expect(yaml.UnmarshalStrict([]byte(text), &tj)).To(Succeed(), "sample %s", name)
			tj.Namespace = ns.Name
			Expect(fw.Client.Create(ctx, &tj, client.DryRunAll)).To(Succeed(), "the API server and Torus's webhooks admit sample %s", name)
		}

		dl := &unstructured.Unstructured{}
		dl.SetGroupVersionKind(schema.GroupVersionKind{Group: "console.openshift.io", Version: "v1", Kind: "ConsoleCLIDownload"})
		Expect(fw.Client.Get(ctx, client.ObjectKey{Name: console.CLIDownloadName}, dl)).To(Succeed())
		links, _, _ := unstructured.NestedSlice(dl.Object, "spec", "links")
		Expect(links).To(HaveLen(len(version.Platforms)))
		Expect(links[0]).To(HaveKeyWithValue("href", "https://github.com/torus-mpi/torus/releases/download/v0.1.0/kubectl-mpi_v0.1.0_linux_amd64.tar.gz"))

		By("applying again: nothing changes")
		before := dl.GetResourceVersion()
		Expect(installer().Install(ctx)).To(Succeed())
		Expect(fw.Client.Get(ctx, client.ObjectKey{Name: console.CLIDownloadName}, dl)).To(Succeed())
		Expect(dl.GetResourceVersion()).To(Equal(before))
	})
})
