package webhook_test

import (
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/runtimes"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/framework"
)

// The default runtimes, as the operator installs them at start: through
// the API server's server-side apply and Torus's own webhooks.
var _ = Describe("Default runtimes", Ordered, func() {
	var mapper *restmapper.DeferredDiscoveryRESTMapper

	installer := func(mode runtimes.UserMode) *runtimes.Installer {
		return &runtimes.Installer{Client: fw.Client, Mapper: mapper, User: mode, Log: GinkgoLogr,
			Backoff: wait.Backoff{Duration: 100 * time.Millisecond, Steps: 1}}
	}
	get := func(name string) *trainer.ClusterTrainingRuntime {
		GinkgoHelper()
		var rt trainer.ClusterTrainingRuntime
		Expect(fw.Client.Get(ctx, client.ObjectKey{Name: name}, &rt)).To(Succeed())
		return &rt
	}
	podUIDs := func(rt *trainer.ClusterTrainingRuntime) []*int64 {
		var uids []*int64
		for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			var uid *int64
			if sc := rj.Template.Spec.Template.Spec.SecurityContext; sc != nil {
				uid = sc.RunAsUser
			}
			uids = append(uids, uid)
		}
		return uids
	}
	deleteAll := func() {
		for _, name := range samples.RuntimeNames() {
			err := fw.Client.Delete(ctx, &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name}})
			Expect(client.IgnoreNotFound(err)).To(Succeed())
		}
	}

	BeforeAll(func() {
		mapper = fw.DiscoveryMapper()
		deleteAll()
		DeferCleanup(deleteAll)
	})

	It("creates one runtime per implementation, running as uid 1000 where no SCC assigns a UID", func() {
		Expect(installer(runtimes.UserAuto).Runnable().Start(ctx)).To(Succeed())
		for _, impl := range mpi.Implementations {
			rt := get(impl.RuntimeName())
			Expect(rt.Labels).To(HaveKeyWithValue(api.LabelDefaultRuntime, "true"))
			Expect(rt.Spec.MLPolicy.MPI).NotTo(BeNil(), rt.Name)
			got, err := mpi.ResolveImplementation(ptr.Deref(rt.Spec.MLPolicy.MPI.MPIImplementation, ""), rt.Annotations)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(impl), "kubectl mpi run --mpi %s picks %s", impl.CLIName(), rt.Name)
			Expect(podUIDs(rt)).To(HaveEach(HaveValue(BeEquivalentTo(mpi.DefaultRunAsUser))), rt.Name)
			for _, mf := range rt.ManagedFields {
				Expect(mf.Manager).To(Equal(runtimes.FieldManager), "runtime %s is the operator's alone", rt.Name)
			}
		}
	})

	It("writes nothing when the runtimes are as it would install them", func() {
		before := get("torus-openmpi").ResourceVersion
		Expect(installer(runtimes.UserAuto).Install(ctx)).To(Succeed())
		Expect(get("torus-openmpi").ResourceVersion).To(Equal(before))
	})

	It("keeps what an administrator changed or added, and updates the rest", func() {
		rt := get("torus-mpich")
		rt.Spec.MLPolicy.MPI.NumProcPerNode = ptr.To[int32](8)
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec
		pod.NodeSelector = map[string]string{"pool": "mpi"}
		Expect(fw.Client.Update(ctx, rt, client.FieldOwner("admin"))).To(Succeed())

		// A new operator version that fixes no UID: its apply removes the
		// UID from runtimes nobody changed, and leaves the edited one alone.
		Expect(installer(runtimes.UserPlatform).Install(ctx)).To(Succeed())
		Expect(podUIDs(get("torus-openmpi"))).To(HaveEach(BeNil()), "the UID the operator alone set is gone")
		edited := get("torus-mpich")
		Expect(edited.Spec.MLPolicy.MPI.NumProcPerNode).To(HaveValue(BeEquivalentTo(8)), "the administrator's value stays")
		Expect(edited.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "mpi"))
	})

	It("fixes no UID once the cluster serves OpenShift's SecurityContextConstraints", func() {
		deleteAll()
		fw.Serve(ctx, mapper, framework.ServedCRD("security.openshift.io", "v1", "SecurityContextConstraints", "securitycontextconstraints", apiextensionsv1.ClusterScoped))
		Expect(installer(runtimes.UserAuto).Install(ctx)).To(Succeed())
		for _, name := range samples.RuntimeNames() {
			Expect(podUIDs(get(name))).To(HaveEach(BeNil()), "%s leaves the UID to restricted-v2", name)
		}
	})

	It("reports an unknown user mode", func() {
		Expect(installer("root").Validate()).To(MatchError(ContainSubstring("auto, platform or image")))
	})
})
