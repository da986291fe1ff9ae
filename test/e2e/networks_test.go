package e2e

import (
	"encoding/json"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

const rdma = "rdma/hca_shared_devices_a"

// multus writes the network-status annotation on a running pod, as Multus
// does when it attaches the pod's networks with an RDMA device from the
// SR-IOV or RDMA shared device plugin. No RDMA device exists on kwok or on
// the real nodes, so these specs write what Multus would report for one;
// test/cluster/multus_test.go has real Multus attach a macvlan on the real
// nodes and Torus read the network-status it writes.
func multus(p *corev1.Pod, status []nadv1.NetworkStatus) {
	data, err := json.Marshal(status)
	Expect(err).NotTo(HaveOccurred())
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{nadv1.NetworkStatusAnnot: string(data)}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Patch(ctx, p, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
}

func attached(ns string, rdmaDevice string) []nadv1.NetworkStatus {
	ib := nadv1.NetworkStatus{Name: ns + "/rdma-net", Interface: "net1", IPs: []string{"192.168.100.7"}}
	if rdmaDevice != "" {
		ib.DeviceInfo = &nadv1.DeviceInfo{Type: "pci", Pci: &nadv1.PciDevice{PciAddress: "0000:3b:00.2", RdmaDevice: rdmaDevice}}
	}
	return []nadv1.NetworkStatus{{Name: "kindnet", Interface: "eth0", Default: true}, ib}
}

var _ = Describe("InfiniBand/RoCE network profiles", func() {
	var ns, queue, profileName string
	BeforeEach(func() {
		ns = newNamespace("rdma")
		queue = newQueue(ns, 8)
		// The queue's ClusterQueue covers the RDMA device too.
		Eventually(func(g Gomega) {
			var cq kueue.ClusterQueue
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &cq)).To(Succeed())
			rg := &cq.Spec.ResourceGroups[0]
			rg.CoveredResources = append(rg.CoveredResources, rdma)
			rg.Flavors[0].Resources = append(rg.Flavors[0].Resources, kueue.ResourceQuota{Name: rdma, NominalQuota: resource.MustParse("4")})
			g.Expect(k8sClient.Update(ctx, &cq)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Expect(k8sClient.Create(ctx, &nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "rdma-net", Namespace: ns, Annotations: map[string]string{mpi.NADResourceName: rdma}},
			Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"0.3.1","name":"rdma-net","type":"macvlan"}`},
		})).To(Succeed())
		profileName = "rdma-" + ns
		p := &torusv1alpha1.MPINetworkProfile{
			ObjectMeta: metav1.ObjectMeta{Name: profileName},
			Spec: torusv1alpha1.MPINetworkProfileSpec{
				Networks: []torusv1alpha1.NetworkAttachment{{Name: "rdma-net", Interface: "net1", RDMA: true}},
				Env:      []torusv1alpha1.ProfileEnv{{EnvVar: corev1.EnvVar{Name: "NCCL_IB_HCA", Value: "mlx5"}}},
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed()) })
	})

	// job creates a job of two workers. Multus reports a pod's networks as
	// it starts it, and the operator fails a job whose running pod has gone
	// a grace period without that report: the specs report each worker's
	// as soon as it runs, not once the whole job does.
	job := func(name string) *trainer.TrainJob {
		tj := wrappers.MakeTrainJob(name, ns).RuntimeRef("torus-openmpi-long").NumNodes(2).Annotation(api.AnnotationNetworkProfile, profileName).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: queue}
		Expect(k8sClient.Create(ctx, tj)).To(Succeed())
		return tj
	}

	It("reports NetworksReady when Multus attached every rank's interface and RDMA device, with Kueue counting the devices", func() {
		tj := job("attached")
		for i := range 2 {
			multus(runningPod(tj, api.RoleWorker, i), attached(ns, "mlx5_3"))
		}
		Eventually(condition(tj, trainjob.ConditionRunning), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		var wls kueue.WorkloadList
		Expect(k8sClient.List(ctx, &wls, client.InNamespace(ns))).To(Succeed())
		Expect(wls.Items).To(HaveLen(1))
		var usage resource.Quantity
		for _, psa := range wls.Items[0].Status.Admission.PodSetAssignments {
			if q, ok := psa.ResourceUsage[rdma]; ok {
				usage.Add(q)
			}
		}
		Expect(usage.String()).To(Equal("2"), "Kueue admitted one RDMA device per worker against the quota")

		Eventually(condition(tj, trainjob.ConditionNetworksReady), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("All 2 pods have the networks of MPINetworkProfile "+profileName)),
		))

		By("kubectl mpi describe shows each rank's interface, IP and RDMA device")
		r := succeed(mpiCmd("describe", "attached", "-n", ns))
		Expect(r.Stdout).To(ContainSubstring("Networks:"))
		Expect(r.Stdout).To(MatchRegexp(`worker-1\s+attached-node-0-1-\S+\s+net1 192\.168\.100\.7 rdma mlx5_3 \(` + ns + `/rdma-net\)`))

		By("kubectl mpi doctor --network runs the operator's preflight")
		r = mpiCmd("doctor", "-n", ns, "--network", profileName)
		Expect(r.Stdout).To(MatchRegexp(`PASS\s+Network ` + profileName))
		Expect(r.Stdout).To(ContainSubstring("each rank pod gets 1 network(s) and 1 " + rdma))
		r = mpiCmd("doctor", "-n", "default", "--network", profileName)
		Expect(r.Stdout).To(MatchRegexp(`FAIL\s+Network ` + profileName))
		Expect(r.Stdout).To(ContainSubstring("NetworkAttachmentDefinition default/rdma-net of MPINetworkProfile " + profileName + " does not exist"))
	})

	It("fails the job when a rank's interface is missing, rather than letting MPI hang", func() {
		tj := job("missing")
		multus(runningPod(tj, api.RoleWorker, 0), attached(ns, "mlx5_3"))
		multus(runningPod(tj, api.RoleWorker, 1), attached(ns, "mlx5_4")[:1])
		Eventually(condition(tj, trainjob.ConditionNetworksReady), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", ContainSubstring("worker-1")),
			HaveField("Message", ContainSubstring("no interface from "+ns+"/rdma-net")),
		))
		Eventually(condition(tj, trainer.TrainJobFailed), timeout, interval).Should(HaveField("Reason", "NetworkNotReady"))
	})
})
