package webhook_test

import (
	"fmt"
	"os"
	"path/filepath"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/test/framework"
)

// Upstream Trainer's runtimes other than its MPI ones, as Torus ships them
// for clusters where upstream's controller made way for Torus (OpenShift
// AI's trainer component removed): each is admitted as it is, and so is a
// TrainJob that uses it.
var _ = Describe("Upstream's non-MPI runtimes", func() {
	It("are admitted as shipped, and so are TrainJobs that use them", func(sctx SpecContext) {
		dir := filepath.Join(framework.RepoRoot(), "kustomize", "runtimes", "upstream")
		data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var k struct {
			Resources []string `json:"resources"`
		}
		Expect(yaml.Unmarshal(data, &k)).To(Succeed())
		Expect(k.Resources).To(ContainElement("torch-distributed.yaml"))
		ns := fw.NewNamespace(sctx, "upstream-runtimes")
		for i, file := range k.Resources {
			data, err := os.ReadFile(filepath.Join(dir, file))
			Expect(err).NotTo(HaveOccurred())
			var rt trainer.ClusterTrainingRuntime
			Expect(yaml.UnmarshalStrict(data, &rt)).To(Succeed(), file)
			Expect(rt.Spec.MLPolicy).NotTo(BeNil(), file)
			Expect(rt.Spec.MLPolicy.MPI).To(BeNil(), "%s: Torus ships its own MPI runtimes", file)
			Expect(fw.Client.Create(ctx, &rt)).To(Succeed(), "%s is admitted", file)
			DeferCleanup(func() { Expect(client.IgnoreNotFound(fw.Client.Delete(ctx, &rt))).To(Succeed()) })

			tj := mpi.NewTrainJob(fmt.Sprintf("uses-runtime-%d", i), ns.Name)
			tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
			Expect(fw.Client.Create(ctx, tj, client.DryRunAll)).To(Succeed(), "a TrainJob for %s is admitted", rt.Name)
		}
	})
})
