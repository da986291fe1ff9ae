package networks_test

import (
	"encoding/json"
	"fmt"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
)

const rdmaResource = "openshift.io/mlnxib"

func nad(ns, name, resourceName string) *nadv1.NetworkAttachmentDefinition {
	n := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"0.3.1","type":"ib-sriov","name":"` + name + `"}`},
	}
	if resourceName != "" {
		n.Annotations = map[string]string{mpi.NADResourceName: resourceName}
	}
	return n
}

func profile(name string, nets ...torusv1alpha1.NetworkAttachment) *torusv1alpha1.MPINetworkProfile {
	return &torusv1alpha1.MPINetworkProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: torusv1alpha1.MPINetworkProfileSpec{
			Networks:         nets,
			SharedMemorySize: ptr.To(resource.MustParse("8Gi")),
			Env: []torusv1alpha1.ProfileEnv{
				{EnvVar: corev1.EnvVar{Name: "NCCL_IB_HCA", Value: "mlx5"}},
				{EnvVar: corev1.EnvVar{Name: "OMPI_MCA_pml", Value: "ucx"}, Implementation: "OpenMPI"},
				{EnvVar: corev1.EnvVar{Name: "I_MPI_FABRICS", Value: "shm:ofi"}, Implementation: "Intel"},
				{EnvVar: corev1.EnvVar{Name: "FI_PROVIDER", Value: "verbs"}, Implementation: "MPICH"},
			},
		},
	}
}

func node(name string, rdma int64) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourcePods: resource.MustParse("110")}
	if rdma > 0 {
		res[rdmaResource] = *resource.NewQuantity(rdma, resource.DecimalSI)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Capacity: res, Allocatable: res}}
}

func condition(tj *trainer.TrainJob, typ string) func(Gomega) *metav1.Condition {
	return framework.Condition(ctx, fw.Client, tj, typ)
}

func podSpec(js *jobsetv1alpha2.JobSet, rjob string) corev1.PodTemplateSpec {
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == rjob {
			return rj.Template.Spec.Template
		}
	}
	Fail("no replicated job " + rjob)
	return corev1.PodTemplateSpec{}
}

// awaitProfileReady waits until the profile controller reports a profile
// Ready: the operator's cache then holds the profile, and the
// NetworkAttachmentDefinitions it names with a namespace. The TrainJob
// controller reads them from that cache and, finding one missing, looks
// again only after 30 s (networkRecheck), past framework.Timeout.
func awaitProfileReady(name string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var p torusv1alpha1.MPINetworkProfile
		g.Expect(fw.Client.Get(ctx, client.ObjectKey{Name: name}, &p)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, "Ready")).To(BeTrue(), "%v", p.Status)
	}, framework.Timeout, framework.Interval).Should(Succeed(), "MPINetworkProfile %s", name)
}

// awaitNADCached waits until the operator's cache holds a
// NetworkAttachmentDefinition that a profile names without a namespace
// (each job's own): through a probe profile that names it with its
// namespace, and a resource, so that only its absence keeps the probe from
// being Ready.
func awaitNADCached(ns, name string) {
	GinkgoHelper()
	probe := profile("probe-"+ns+"-"+name, torusv1alpha1.NetworkAttachment{Name: name, Namespace: ns, ResourceName: "example.com/probe"})
	Expect(fw.Client.Create(ctx, probe)).To(Succeed())
	awaitProfileReady(probe.Name)
	Expect(fw.Client.Delete(ctx, probe)).To(Succeed())
}

var _ = Describe("MPINetworkProfile", Ordered, func() {
	var shared *corev1.Namespace
	BeforeAll(func(sctx SpecContext) {
		Expect(fw.Client.Create(ctx, node("gpu-node-0", 8))).To(Succeed())
		shared = fw.NewNamespace(sctx, "sriov")
		Expect(fw.Client.Create(ctx, nad(shared.Name, "ib-sriov", rdmaResource))).To(Succeed())
		Expect(fw.Client.Create(ctx, profile("ib", torusv1alpha1.NetworkAttachment{Name: "ib-sriov", Namespace: shared.Name, Interface: "ib0", RDMA: true}))).To(Succeed())
		awaitProfileReady("ib")
	})

	DescribeTable("gives every rank pod its networks, devices, capabilities, /dev/shm and environment",
		func(sctx SpecContext, runtime string, wantEnv, notEnv []string) {
			ns := fw.NewNamespace(sctx, "job")
			tj := wrappers.MakeTrainJob("ibjob", ns.Name).RuntimeRef(runtime).NumNodes(2).Annotation(api.AnnotationNetworkProfile, "ib").Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			var js jobsetv1alpha2.JobSet
			Eventually(func() error { return fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js) }, framework.Timeout, framework.Interval).Should(Succeed())

			worker := podSpec(&js, "node")
			var nets []nadv1.NetworkSelectionElement
			Expect(json.Unmarshal([]byte(worker.Annotations["k8s.v1.cni.cncf.io/networks"]), &nets)).To(Succeed())
			Expect(nets).To(Equal([]nadv1.NetworkSelectionElement{{Name: "ib-sriov", Namespace: shared.Name, InterfaceRequest: "ib0"}}),
				"the NAD in another namespace is referenced with its namespace")
			ctr := worker.Spec.Containers[0]
			Expect(ctr.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceName(rdmaResource), resource.MustParse("1")), "the device resource comes from the NAD's annotation")
			Expect(ctr.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName(rdmaResource), resource.MustParse("1")))
			Expect(ctr.SecurityContext.Capabilities.Add).To(ContainElement(corev1.Capability("IPC_LOCK")))
			Expect(ctr.VolumeMounts).To(ContainElement(HaveField("MountPath", "/dev/shm")))
			var names []string
			for _, e := range ctr.Env {
				names = append(names, e.Name)
			}
			Expect(names).To(ContainElements(wantEnv))
			Expect(names).NotTo(ContainElements(notEnv))

			launcher := podSpec(&js, "launcher")
			Expect(launcher.Annotations).NotTo(HaveKey("k8s.v1.cni.cncf.io/networks"), "a launcher that runs no ranks needs no device")
			var launcherEnv []string
			for _, e := range launcher.Spec.Containers[0].Env {
				launcherEnv = append(launcherEnv, e.Name)
			}
			Expect(launcherEnv).To(ContainElements(wantEnv), "the launcher forwards the profile's variables to the ranks")
		},
		Entry("Open MPI", "torus-openmpi", []string{"NCCL_IB_HCA", "OMPI_MCA_pml"}, []string{"I_MPI_FABRICS", "FI_PROVIDER"}),
		Entry("Intel MPI", "torus-intelmpi", []string{"NCCL_IB_HCA", "I_MPI_FABRICS"}, []string{"OMPI_MCA_pml", "FI_PROVIDER"}),
		Entry("MPICH", "torus-mpich", []string{"NCCL_IB_HCA", "FI_PROVIDER"}, []string{"OMPI_MCA_pml", "I_MPI_FABRICS"}),
	)

	It("says which Pod Security level and SCC a profile's capabilities need, and PodSecurity refuses its pods under restricted", func(sctx SpecContext) {
		ns := fw.NewLabelledNamespace(sctx, "pss", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
		tj := wrappers.MakeTrainJob("locked", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Annotation(api.AnnotationNetworkProfile, "ib").Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		var js jobsetv1alpha2.JobSet
		Eventually(func() error { return fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js) }, framework.Timeout, framework.Interval).Should(Succeed())

		worker := podSpec(&js, "node")
		launcher := podSpec(&js, "launcher")
		verdicts, err := framework.JudgeSCC(map[string]*corev1.PodSpec{"worker": &worker.Spec, "launcher": &launcher.Spec})
		Expect(err).NotTo(HaveOccurred())
		Expect(verdicts["worker"].Refusal).To(ContainSubstring(`"IPC_LOCK": capability may not be added`), "restricted-v2 refuses it")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "locked-", Namespace: ns.Name}, Spec: worker.Spec}
		Expect(fw.Client.Create(ctx, pod, client.DryRunAll)).To(MatchError(ContainSubstring(`violates PodSecurity "restricted:latest"`)))
		Expect(verdicts["launcher"]).To(Equal(framework.SCCVerdict{SCC: "restricted-v2"}), "a launcher that runs no ranks gets no capability")

		Eventually(condition(tj, trainjob.ConditionNetworksReady), framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", ContainSubstring("its rank pods add capabilities IPC_LOCK, which need the namespace's Pod Security level privileged")),
			HaveField("Message", ContainSubstring("an SCC that allows them")),
		))
	})

	It("uses the profile's resourceName over the NAD's and a NAD in the job's own namespace", func(sctx SpecContext) {
		ns := fw.NewNamespace(sctx, "local")
		Expect(fw.Client.Create(ctx, nad(ns.Name, "roce", ""))).To(Succeed())
		Expect(fw.Client.Create(ctx, profile("roce-override", torusv1alpha1.NetworkAttachment{Name: "roce", ResourceName: rdmaResource, ResourceCount: ptr.To[int32](2)}))).To(Succeed())
		awaitProfileReady("roce-override")
		awaitNADCached(ns.Name, "roce")
		tj := wrappers.MakeTrainJob("roce", ns.Name).RuntimeRef("torus-openmpi").Annotation(api.AnnotationNetworkProfile, "roce-override").Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		var js jobsetv1alpha2.JobSet
		Eventually(func() error { return fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js) }, framework.Timeout, framework.Interval).Should(Succeed())
		worker := podSpec(&js, "node")
		Expect(worker.Annotations["k8s.v1.cni.cncf.io/networks"]).To(Equal(fmt.Sprintf(`[{"name":"roce","namespace":"%s"}]`, ns.Name)))
		Expect(worker.Spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName(rdmaResource), resource.MustParse("2")))
	})

	DescribeTable("keeps a job from starting when the network is not ready, saying what to fix",
		func(sctx SpecContext, setup func(ns string) string, wantMsg string) {
			ns := fw.NewNamespace(sctx, "pre")
			prof := setup(ns.Name)
			tj := wrappers.MakeTrainJob("blocked", ns.Name).RuntimeRef("torus-mpich").Annotation(api.AnnotationNetworkProfile, prof).Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			Eventually(condition(tj, trainjob.ConditionNetworksReady), framework.Timeout, framework.Interval).Should(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "NetworkNotReady"), HaveField("Message", ContainSubstring(wantMsg))))
			Consistently(func() bool {
				return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}))
			}, framework.ShortWindow, framework.Interval).Should(BeTrue(), "no JobSet while the network is not ready")
			Eventually(framework.EventReasons(ctx, fw.Client, tj), framework.Timeout, framework.Interval).Should(ContainElement("NetworkNotReady"))
		},
		Entry("a profile that does not exist", func(string) string { return "no-such-profile" },
			`MPINetworkProfile "no-such-profile" does not exist: create it`),
		Entry("a missing NetworkAttachmentDefinition", func(ns string) string {
			Expect(fw.Client.Create(ctx, profile("missing-"+ns, torusv1alpha1.NetworkAttachment{Name: "nope"}))).To(Succeed())
			awaitProfileReady("missing-" + ns)
			return "missing-" + ns
		}, "/nope of MPINetworkProfile missing-"),
		Entry("a NAD with no resourceName and no override", func(ns string) string {
			Expect(fw.Client.Create(ctx, nad(ns, "plain", ""))).To(Succeed())
			Expect(fw.Client.Create(ctx, profile("plain-"+ns, torusv1alpha1.NetworkAttachment{Name: "plain"}))).To(Succeed())
			awaitProfileReady("plain-" + ns)
			awaitNADCached(ns, "plain")
			return "plain-" + ns
		}, "has no k8s.v1.cni.cncf.io/resourceName annotation and MPINetworkProfile"),
		Entry("no node with the device resource", func(ns string) string {
			Expect(fw.Client.Create(ctx, nad(ns, "hca", "rdma/hca_shared_devices_a"))).To(Succeed())
			Expect(fw.Client.Create(ctx, profile("hca-"+ns, torusv1alpha1.NetworkAttachment{Name: "hca"}))).To(Succeed())
			awaitProfileReady("hca-" + ns)
			awaitNADCached(ns, "hca")
			return "hca-" + ns
		}, "no node has 1 allocatable rdma/hca_shared_devices_a"),
	)

	Describe("after the pods start", func() {
		var ns string
		var tj *trainer.TrainJob
		BeforeEach(func(sctx SpecContext) {
			ns = fw.NewNamespace(sctx, "status").Name
			tj = wrappers.MakeTrainJob("attached", ns).RuntimeRef("torus-openmpi").NumNodes(2).Annotation(api.AnnotationNetworkProfile, "ib").Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			Eventually(func() error { return fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}) }, framework.Timeout, framework.Interval).Should(Succeed())
		})

		// runningWorker plays kubelet and Multus for one worker.
		runningWorker := func(index int, status []nadv1.NetworkStatus) {
			data, err := json.Marshal(status)
			Expect(err).NotTo(HaveOccurred())
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("attached-node-0-%d-abcde", index), Namespace: ns,
					Labels:      map[string]string{api.LabelJobName: "attached", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": fmt.Sprint(index)},
					Annotations: map[string]string{"k8s.v1.cni.cncf.io/network-status": string(data)},
				},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "x"}}},
			}
			framework.ControlledBy(p, framework.JobOf(ctx, fw.Client, tj, "node"))
			Expect(fw.Client.Create(ctx, p)).To(Succeed())
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: ptr.To(metav1.NewTime(time.Now()))}
			Expect(fw.Client.Status().Update(ctx, p)).To(Succeed())
		}
		complete := func() []nadv1.NetworkStatus {
			return []nadv1.NetworkStatus{
				{Name: "cbr0", Interface: "eth0", Default: true},
				{Name: "sriov/ib-sriov", Interface: "ib0", DeviceInfo: &nadv1.DeviceInfo{Type: "pci", Pci: &nadv1.PciDevice{PciAddress: "0000:3b:00.2", RdmaDevice: "mlx5_3"}}},
			}
		}

		It("reports NetworksReady once every rank pod has its interface and RDMA device", func() {
			st := complete()
			st[1].Name = shared.Name + "/ib-sriov"
			runningWorker(0, st)
			runningWorker(1, st)
			Eventually(condition(tj, trainjob.ConditionNetworksReady), framework.Timeout, framework.Interval).Should(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("All 2 pods have the networks of MPINetworkProfile ib")),
			))
		})

		It("fails the job when a pod lacks its RDMA device, naming the pod", func() {
			st := complete()
			st[1].Name = shared.Name + "/ib-sriov"
			runningWorker(0, st)
			broken := complete()
			broken[1].Name = shared.Name + "/ib-sriov"
			broken[1].DeviceInfo = nil
			runningWorker(1, broken)
			Eventually(condition(tj, trainjob.ConditionNetworksReady), framework.Timeout, framework.Interval).Should(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Message", ContainSubstring("worker-1 (pod attached-node-0-1-abcde): no RDMA device on ib0")),
			))
			Eventually(condition(tj, trainer.TrainJobFailed), framework.Timeout, framework.Interval).Should(And(
				HaveField("Reason", "NetworkNotReady"), HaveField("Message", ContainSubstring("rather than left to hang in MPI_Init"))))
		})
	})

	It("reports on the profile whether its networks exist", func() {
		Eventually(func(g Gomega) {
			var p torusv1alpha1.MPINetworkProfile
			g.Expect(fw.Client.Get(ctx, client.ObjectKey{Name: "ib"}, &p)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, "Ready")).To(BeTrue(), "%v", p.Status)
			g.Expect(p.Status.Networks).To(ConsistOf(HaveField("ResourceName", rdmaResource)))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(fw.Client.Create(ctx, profile("broken", torusv1alpha1.NetworkAttachment{Name: "nope", Namespace: shared.Name}))).To(Succeed())
		Eventually(func(g Gomega) {
			var p torusv1alpha1.MPINetworkProfile
			g.Expect(fw.Client.Get(ctx, client.ObjectKey{Name: "broken"}, &p)).To(Succeed())
			c := meta.FindStatusCondition(p.Status.Conditions, "Ready")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("does not exist"))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("gives a job in an opted-in namespace a NetworkPolicy admitting only its own pods", func(sctx SpecContext) {
		// Annotated from its creation on: the operator reads the namespace
		// from its cache, which may not yet hold a later update when the
		// job comes, and no event brings the job back after it.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-",
			Annotations: map[string]string{api.AnnotationNetworkPolicy: "restricted"}}}
		Expect(fw.Client.Create(ctx, ns)).To(Succeed())
		Expect(fw.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}})).To(Succeed())
		tj := wrappers.MakeTrainJob("fenced", ns.Name).RuntimeRef("torus-openmpi").Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(func(g Gomega) {
			var np networkingv1.NetworkPolicy
			g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "fenced-mpi"}, &np)).To(Succeed())
			g.Expect(metav1.IsControlledBy(&np, tj)).To(BeTrue())
			g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{api.LabelJobName: "fenced"}))
			g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}), "egress (DNS, the launcher's ssh) stays open")
			g.Expect(np.Spec.Ingress).To(HaveLen(1))
			g.Expect(np.Spec.Ingress[0].Ports).To(BeEmpty(), "sshd and MPI's dynamic ports")
			g.Expect(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(Equal(map[string]string{api.LabelJobName: "fenced"}))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})
})
