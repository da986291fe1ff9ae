package webhook_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/framework"
)

var _ = Describe("Admission", Ordered, func() {
	var ns *corev1.Namespace
	BeforeAll(func(sctx SpecContext) {
		ns = fw.NewNamespace(sctx, "admission")
		Expect(fw.Client.Create(ctx, wrappers.MakeMPIRuntime("wh-openmpi", trainer.MPIImplementationOpenMPI).Obj())).To(Succeed())
	})

	DescribeTable("rejects TrainJobs a data scientist must fix, saying how",
		func(tj func(ns string) *trainer.TrainJob, wantMsgs ...string) {
			err := fw.Client.Create(ctx, tj(ns.Name))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, m := range wantMsgs {
				Expect(err.Error()).To(ContainSubstring(m))
			}
		},
		Entry("numNodes < 1", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("zero", ns).RuntimeRef("wh-openmpi").NumNodes(0).Obj()
		}, "spec.trainer.numNodes: Invalid value: 0: must be at least 1: it is the number of MPI nodes"),
		Entry("numNodes MaxInt32, which overflowed the operator's placement", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("huge", ns).RuntimeRef("wh-openmpi").NumNodes(math.MaxInt32).Obj()
		}, "spec.trainer.numNodes: Invalid value: 2147483647: must be at most 16384, the nodes this Torus operator runs a job (its --max-nodes)"),
		Entry("numProcPerNode MaxInt32", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("hugeslots", ns).RuntimeRef("wh-openmpi").NumProcPerNode(math.MaxInt32).Obj()
		}, "spec.trainer.numProcPerNode: Invalid value: 2147483647: must be at most 4096 ranks (slots) on a node"),
		Entry("a hostfile larger than the job's Secret holds", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob(strings.Repeat("h", 38), ns).RuntimeRef("wh-openmpi").NumNodes(16384).Obj()
		}, "spec.trainer.numNodes", "more than the 983040 the job's Secret holds beside its keys: use at most"),
		Entry("numProcPerNode < 1", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("noslots", ns).RuntimeRef("wh-openmpi").NumProcPerNode(0).Obj()
		}, "spec.trainer.numProcPerNode: Invalid value: 0: must be at least 1: it is the number of MPI ranks (slots) on each node"),
		Entry("a reserved environment variable", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("env", ns).RuntimeRef("wh-openmpi").Env("FOO", "1").Env("OMPI_MCA_orte_default_hostfile", "/tmp/h").Obj()
		}, "spec.trainer.env[1].name: Forbidden: OMPI_MCA_orte_default_hostfile is set by Torus", "remove it"),
		Entry("a name too long for pod host names", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob(strings.Repeat("a", 45), ns).RuntimeRef("wh-openmpi").Obj()
		}, "metadata.name", "is 45 characters; an MPI job needs at most 44", "choose a shorter name"),
		Entry("an unknown Open MPI version", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("ompi6", ns).RuntimeRef("wh-openmpi").Annotation(api.AnnotationOpenMPIVersion, "6").Obj()
		}, `torus-mpi.io/openmpi-version="6": set it to "4" or "5"`),
		Entry("a runtime that does not exist", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("lost", ns).RuntimeRef("no-such-runtime").Obj()
		}, `ClusterTrainingRuntime "no-such-runtime" not found: create it`),
		Entry("a dataset initializer, which MPI jobs do not run", func(ns string) *trainer.TrainJob {
			tj := wrappers.MakeTrainJob("init", ns).RuntimeRef("wh-openmpi").Obj()
			tj.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")}}
			return tj
		}, "spec.initializer: Forbidden: Torus runs MPI jobs without upstream's dataset and model initializers"),
		Entry("a runtime patch of the MPI container's env, which is the TrainJob's", func(ns string) *trainer.TrainJob {
			tj := wrappers.MakeTrainJob("patched", ns).RuntimeRef("wh-openmpi").Obj()
			tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/tuner", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
				Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						Containers: []trainer.ContainerPatch{{Name: "node", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
					}}}},
				}}}},
			}}}
			return tj
		}, "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env: Forbidden",
			"set it in spec.trainer.env, which reaches the launcher and every worker"),
		Entry("a runtime patch that replaces the volume of the job's keys", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("swapkeys", ns).RuntimeRef("wh-openmpi").PodPatch("example.com/x", trainer.PodSpecPatch{
				Volumes: []corev1.Volume{{Name: "mpi-ssh", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			}, "node").Obj()
		}, "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].name: Forbidden: mpi-ssh is the volume Torus gives the job's SSH keys and hostfile"),
		Entry("a runtime patch that mounts the key volume into the launcher", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("mountkeys", ns).RuntimeRef("wh-openmpi").PodPatch("example.com/x", trainer.PodSpecPatch{
				Containers: []trainer.ContainerPatch{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "mpi-ssh-secret", MountPath: "/keys"}}}},
			}, "launcher").Obj()
		}, "containers[0].volumeMounts[0].name: Forbidden: mpi-ssh-secret holds the job's SSH keys or hostfile"),
		// The bad-input catalog: what a careless or hostile user may send.
		Entry("an SSH port that is not a number", annotated(api.AnnotationSSHPort, "x"),
			`metadata.annotations[torus-mpi.io/ssh-port]: Invalid value: "x": annotation torus-mpi.io/ssh-port="x": set it to a port number between 1024 and 65535`),
		Entry("an SSH port a non-root sshd cannot bind", annotated(api.AnnotationSSHPort, "22"),
			`annotation torus-mpi.io/ssh-port="22": set it to a port number between 1024 and 65535 (sshd runs as the pod's non-root user, which cannot bind lower ports)`),
		Entry("an SSH port beyond 65535", annotated(api.AnnotationSSHPort, "70000"), `torus-mpi.io/ssh-port="70000": set it to a port number between 1024 and 65535`),
		Entry("a scheduling timeout that is no duration", annotated(api.AnnotationSchedulingTimeout, "banana"),
			`annotation torus-mpi.io/scheduling-timeout="banana": set it to a positive duration such as 10m or 90s`),
		Entry("a negative scheduling timeout", annotated(api.AnnotationSchedulingTimeout, "-5m"), `torus-mpi.io/scheduling-timeout="-5m": set it to a positive duration`),
		Entry("a topology that is no node label", annotated(api.AnnotationTopology, "not a label!"),
			`annotation torus-mpi.io/topology="not a label!": set it to the node label whose domain all pods must share, such as cloud.provider.com/topology-rack`),
		Entry("keep-ssh-keys neither true nor false", annotated(api.AnnotationKeepSSHKeys, "maybe"),
			`annotation torus-mpi.io/keep-ssh-keys="maybe": set it to "true" to keep a finished job's SSH Secret, or remove it`),
		Entry("an SSH key type OpenSSH no longer takes", annotated(api.AnnotationSSHKeyAlgorithm, "dsa"),
			`unknown SSH key algorithm "dsa": use ed25519, ecdsa-p256, ecdsa-p384 (FIPS) or rsa-3072 (FIPS)`),
		Entry("a network profile name no object can have", annotated(api.AnnotationNetworkProfile, "Not_A_Name"),
			`annotation torus-mpi.io/network-profile="Not_A_Name": set it to the name of an MPINetworkProfile`),
		Entry("an MPICH variable Torus sets", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("hydra", ns).RuntimeRef("wh-openmpi").Env("HYDRA_HOST_FILE", "/tmp/h").Obj()
		}, "spec.trainer.env[0].name: Forbidden: HYDRA_HOST_FILE is set by Torus"),
		Entry("another job's private key as an environment variable", func(ns string) *trainer.TrainJob {
			tj := wrappers.MakeTrainJob("thief", ns).RuntimeRef("wh-openmpi").Env("X", "1").Obj()
			tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "victim-mpi-ssh"}, Key: "id_ed25519"}}})
			return tj
		}, `spec.trainer.env[1].valueFrom.secretKeyRef.name: Forbidden: Secret "victim-mpi-ssh" holds an MPI job's SSH keys, which only that job's own pods receive`),
		Entry("another job's keys through a projected volume of a runtime patch", func(ns string) *trainer.TrainJob {
			tj := wrappers.MakeTrainJob("projector", ns).RuntimeRef("wh-openmpi").Obj()
			tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/x", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
				Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						Volumes: []corev1.Volume{{Name: "k", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
							Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "victim-mpi-ssh"}},
						}}}}}},
					}}}},
				}}}},
			}}}
			return tj
		}, `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.volumes[0].projected.sources[0].secret.name: Forbidden: Secret "victim-mpi-ssh" holds an MPI job's SSH keys`),
		Entry("another job's keys as an image pull secret of a runtime patch", func(ns string) *trainer.TrainJob {
			tj := wrappers.MakeTrainJob("puller", ns).RuntimeRef("wh-openmpi").Obj()
			tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/x", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
				Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: "launcher", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						ImagePullSecrets: []corev1.LocalObjectReference{{Name: "victim-mpi-ssh"}},
					}}}},
				}}}},
			}}}
			return tj
		}, `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.imagePullSecrets[0].name: Forbidden: Secret "victim-mpi-ssh"`),
		Entry("a namespaced runtime that does not exist", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("nsruntime", ns).NamespacedRuntimeRef("nope").Obj()
		}, `spec.runtimeRef: Invalid value: "nope": TrainingRuntime "nope" not found: create it, or set spec.runtimeRef to an existing runtime`),
		Entry("an empty image", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("noimage", ns).RuntimeRef("wh-openmpi").Image("").Obj()
		}, `spec.trainer.image: Invalid value: "": not an image reference`, "or leave it out for the runtime's"),
		Entry("an image name with a space", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("spaced", ns).RuntimeRef("wh-openmpi").Image("bad image:tag").Obj()
		}, `spec.trainer.image: Invalid value: "bad image:tag": not an image reference`),
		Entry("a negative deadline, refused by the CRD schema", func(ns string) *trainer.TrainJob {
			return wrappers.MakeTrainJob("deadline", ns).RuntimeRef("wh-openmpi").ActiveDeadlineSeconds(-1).Obj()
		}, "spec.activeDeadlineSeconds: Invalid value: -1", "should be greater than or equal to 1"),
		Entry("a runtime patch that relabels pods into another job", func(ns string) *trainer.TrainJob {
			tj := wrappers.MakeTrainJob("relabel", ns).RuntimeRef("wh-openmpi").Obj()
			tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/x", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
				Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
					Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
						Metadata: &metav1.ObjectMeta{Labels: map[string]string{api.LabelJobName: "victim"}},
					}}},
				}}}},
			}}}
			return tj
		}, "template.metadata.labels[torus-mpi.io/job-name]: Forbidden: keys under torus-mpi.io/ are Torus's"),
	)

	DescribeTable("rejects MPI runtimes Torus cannot run, saying how",
		func(rt *trainer.ClusterTrainingRuntime, wantMsgs ...string) {
			err := fw.Client.Create(ctx, rt)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, m := range wantMsgs {
				Expect(err.Error()).To(ContainSubstring(m))
			}
		},
		Entry("no launcher job", wrappers.MakeMPIRuntime("nolauncher", "OpenMPI").WithoutReplicatedJob("launcher").Obj(),
			`has no replicated job "launcher": an MPI runtime needs a "launcher" job (mpirun) and a "node" job`),
		Entry("no node job", wrappers.MakeMPIRuntime("nonode", "MPICH").WithoutReplicatedJob("node").Obj(),
			`has no replicated job "node"`),
		Entry("an unknown MPI implementation, refused by the CRD schema", wrappers.MakeMPIRuntime("mvapich", "MVAPICH").Obj(),
			`spec.mlPolicy.mpi.mpiImplementation: Unsupported value: "MVAPICH"`, `"OpenMPI", "Intel", "MPICH"`),
		Entry("an unknown Open MPI version", wrappers.MakeMPIRuntime("ompi6", "OpenMPI").Annotation(api.AnnotationOpenMPIVersion, "6").Obj(),
			`spec.mlPolicy.mpi.mpiImplementation`, `set it to "4" or "5"`),
		Entry("an SSH directory that would inject into sshd_config", withSSHPath(wrappers.MakeMPIRuntime("inject", "OpenMPI").Obj(), "/home/u/.ssh\nPermitRootLogin yes"),
			`spec.mlPolicy.mpi.sshAuthMountPath`, "set it to a clean absolute directory path"),
		Entry("numNodes above what Torus runs", withNumNodes(wrappers.MakeMPIRuntime("huge", "OpenMPI").Obj(), math.MaxInt32),
			`spec.mlPolicy.numNodes: Invalid value: 2147483647: must be at most 65536`),
		Entry("a pod group policy, where Kueue gang-schedules MPI jobs", withPodGroupPolicy(wrappers.MakeMPIRuntime("coscheduled", "OpenMPI").Obj()),
			"spec.podGroupPolicy: Forbidden: Torus gang-schedules MPI jobs through Kueue"),
		Entry("a relative SSH directory", withSSHPath(wrappers.MakeMPIRuntime("relative", "OpenMPI").Obj(), "ssh"),
			`spec.mlPolicy.mpi.sshAuthMountPath: Invalid value: "ssh"`, "set it to a clean absolute directory path"),
		Entry("the root directory as SSH directory", withSSHPath(wrappers.MakeMPIRuntime("rootdir", "OpenMPI").Obj(), "/"),
			`spec.mlPolicy.mpi.sshAuthMountPath: Invalid value: "/"`),
		Entry("an SSH directory that climbs out", withSSHPath(wrappers.MakeMPIRuntime("climb", "OpenMPI").Obj(), "/home/../etc"),
			`spec.mlPolicy.mpi.sshAuthMountPath: Invalid value: "/home/../etc"`),
		Entry("port 0 for every job's sshd", wrappers.MakeMPIRuntime("port0", "OpenMPI").Annotation(api.AnnotationSSHPort, "0").Obj(),
			`metadata.annotations[torus-mpi.io/ssh-port]: Invalid value: "0"`, "set it to a port number between 1024 and 65535"),
		Entry("a scheduling timeout of forever", wrappers.MakeMPIRuntime("forever", "OpenMPI").Annotation(api.AnnotationSchedulingTimeout, "forever").Obj(),
			`metadata.annotations[torus-mpi.io/scheduling-timeout]: Invalid value: "forever"`),
		Entry("RSA keys too short for FIPS", wrappers.MakeMPIRuntime("rsa1024", "OpenMPI").Annotation(api.AnnotationSSHKeyAlgorithm, "rsa-1024").Obj(),
			`unknown SSH key algorithm "rsa-1024"`),
		Entry("a topology that is no node label", wrappers.MakeMPIRuntime("topology", "OpenMPI").Annotation(api.AnnotationTopology, "??").Obj(),
			`metadata.annotations[torus-mpi.io/topology]: Invalid value: "??"`),
		Entry("no ranks per node", withProcsPerNode(wrappers.MakeMPIRuntime("noprocs", "OpenMPI").Obj(), 0),
			"spec.mlPolicy.mpi.numProcPerNode: Invalid value: 0: must be at least 1"),
		Entry("no nodes", withNumNodes(wrappers.MakeMPIRuntime("nonodes", "OpenMPI").Obj(), 0),
			"spec.mlPolicy.numNodes: Invalid value: 0: must be at least 1"),
	)

	It("rejects a runtime whose node job has no node container", func() {
		rt := wrappers.MakeMPIRuntime("nocontainer", "Intel").Obj()
		rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Name = "worker"
		err := fw.Client.Create(ctx, rt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring(`replicated job "node" needs a container named "node"`))
	})

	It("admits Intel MPI and MPICH runtimes, which upstream's enum refuses", func() {
		Expect(fw.Client.Create(ctx, wrappers.MakeMPIRuntime("wh-intel", "Intel").Obj())).To(Succeed())
		Expect(fw.Client.Create(ctx, wrappers.MakeMPIRuntime("wh-mpich", "MPICH").Obj())).To(Succeed())
	})

	It("admits the runtime patches upstream Trainer applies, and changes to them only while the job is suspended", func(sctx SpecContext) {
		tj := wrappers.MakeTrainJob("patched", ns.Name).RuntimeRef("wh-openmpi").PodPatch("example.com/team", trainer.PodSpecPatch{
			Volumes:            []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets"}}}},
			Containers:         []trainer.ContainerPatch{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
			ServiceAccountName: ptr.To("trainer"),
			NodeSelector:       map[string]string{"zone": "a"},
		}, "launcher", "node").Obj()
		Expect(fw.Client.Create(sctx, tj)).To(Succeed())
		tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector["zone"] = "b"
		err := fw.Client.Update(sctx, tj)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.runtimePatches: Forbidden: a running job's runtime patches cannot change"))
		tj.Spec.Suspend = ptr.To(true)
		Expect(fw.Client.Update(sctx, tj)).To(Succeed(), "a change in the update that suspends the job")
	})

	It("leaves TrainJobs of other runtimes alone", func() {
		rt := wrappers.MakeMPIRuntime("wh-torch", "OpenMPI").NotMPI().Obj()
		Expect(fw.Client.Create(ctx, rt)).To(Succeed())
		tj := wrappers.MakeTrainJob("torch", ns.Name).RuntimeRef("wh-torch").Env("OMPI_MCA_orte_default_hostfile", "x").Obj()
		framework.AwaitAdmitted(ctx, fw.Client, tj)
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Expect(tj.Labels).NotTo(HaveKey(api.LabelImplementation))
	})

	It("leaves TrainJobs managed by another controller alone", func() {
		tj := wrappers.MakeTrainJob("multikueue", ns.Name).RuntimeRef("no-such-runtime").Obj()
		tj.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
	})

	It("refuses a job whose namespace may not use the network profile it selects, naming the profile and how to ask for it", func() {
		profile := &torusv1alpha1.MPINetworkProfile{
			ObjectMeta: metav1.ObjectMeta{Name: "wh-reserved"},
			Spec: torusv1alpha1.MPINetworkProfileSpec{
				Networks:          []torusv1alpha1.NetworkAttachment{{Name: "ib"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"torus-mpi.io/rdma": "granted"}},
			},
		}
		Expect(fw.Client.Create(ctx, profile)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(fw.Client.Delete(ctx, profile))).To(Succeed()) })
		job := func(name string) *trainer.TrainJob {
			return wrappers.MakeTrainJob(name, ns.Name).RuntimeRef("wh-openmpi").Annotation(api.AnnotationNetworkProfile, "wh-reserved").Obj()
		}
		err := fw.Client.Create(ctx, job("unentitled"))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring(fmt.Sprintf(`metadata.annotations[torus-mpi.io/network-profile]: Forbidden: MPINetworkProfile "wh-reserved" is reserved for namespaces matching "torus-mpi.io/rdma=granted", and namespace %q is not one of them: ask your cluster administrator to grant it the profile`, ns.Name)))

		By("admitted once the administrator grants the namespace the profile")
		granted := ns.DeepCopy()
		granted.Labels = map[string]string{"torus-mpi.io/rdma": "granted"}
		Expect(fw.Client.Update(ctx, granted)).To(Succeed())
		Expect(fw.Client.Create(ctx, job("entitled"))).To(Succeed())
	})

	It("warns, and admits, a GPU job with more ranks per worker than GPUs", func() {
		var warnings []string
		cfg := rest.CopyConfig(fw.Config)
		cfg.WarningHandlerWithContext = (*warningsTo)(&warnings)
		c, err := client.New(cfg, client.Options{Scheme: fw.Client.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		gpus := func(name string, ranks int32) *trainer.TrainJob {
			return wrappers.MakeTrainJob(name, ns.Name).RuntimeRef("wh-openmpi").NumProcPerNode(ranks).
				Resources(corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}).Obj()
		}
		Expect(c.Create(ctx, gpus("shares", 4))).To(Succeed())
		Expect(warnings).To(ConsistOf(ContainSubstring(`each worker runs 4 ranks on 2 GPUs (nvidia.com/gpu): NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU detected")`)))

		By("a rank per GPU: no warning")
		warnings = nil
		Expect(c.Create(ctx, gpus("fits", 2))).To(Succeed())
		Expect(warnings).To(BeEmpty())
	})

	It("records who created an MPI job, as the API server authenticated them, and keeps that record from anyone's hands", func() {
		cfg := rest.CopyConfig(fw.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice@example.com", Groups: []string{"system:masters"}}
		alice, err := client.New(cfg, client.Options{Scheme: fw.Client.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		tj := wrappers.MakeTrainJob("whose", ns.Name).RuntimeRef("wh-openmpi").Obj()
		tj.Annotations = map[string]string{api.AnnotationCreatedBy: "mallory"}
		Expect(alice.Create(ctx, tj)).To(Succeed())
		Expect(tj.Annotations).To(HaveKeyWithValue(api.AnnotationCreatedBy, "alice@example.com"), "the user's own claim was kept")

		By("another user's update changing it: the record stands")
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"torus-mpi.io/created-by":"mallory"}}}`)))).To(Succeed())
		Expect(tj.Annotations).To(HaveKeyWithValue(api.AnnotationCreatedBy, "alice@example.com"))
		By("or removing it")
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"torus-mpi.io/created-by":null}}}`)))).To(Succeed())
		Expect(tj.Annotations).To(HaveKeyWithValue(api.AnnotationCreatedBy, "alice@example.com"))

		By("a job on another runtime, which Torus's mutation does not see, claiming another creator")
		other := wrappers.MakeMPIRuntime("wh-creator-torch", trainer.MPIImplementationOpenMPI).NotMPI().Obj()
		Expect(fw.Client.Create(ctx, other)).To(Succeed())
		DeferCleanup(func() { Expect(fw.Client.Delete(ctx, other)).To(Succeed()) })
		forged := wrappers.MakeTrainJob("forged", ns.Name).RuntimeRef(other.Name).Obj()
		framework.AwaitAdmitted(ctx, alice, forged)
		forged.Annotations = map[string]string{api.AnnotationCreatedBy: "mallory"}
		err = alice.Create(ctx, forged)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring("torus-mpi.io/created-by")))
		forged.Annotations = nil
		Expect(alice.Create(ctx, forged)).To(Succeed())
		Expect(fw.Client.Patch(ctx, forged, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"torus-mpi.io/created-by":"alice@example.com"}}}`)))).
			To(MatchError(ContainSubstring("cannot be changed, added or removed")), "a claim added later, even a true one")
	})

	It("refuses a checkpoint claim the job's pods cannot share, naming it and what works; a claim deleted since does not hold a job back", func() {
		claim := func(name string, mode corev1.PersistentVolumeAccessMode) {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{mode},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}
			Expect(fw.Client.Create(ctx, pvc)).To(Succeed())
		}
		claim("ckpt-shared", corev1.ReadWriteMany)
		claim("ckpt-node", corev1.ReadWriteOnce)
		job := func(name, value string) *trainer.TrainJob {
			return wrappers.MakeTrainJob(name, ns.Name).RuntimeRef("wh-openmpi").NumNodes(2).Annotation(api.AnnotationCheckpointVolume, value).Obj()
		}
		for _, tc := range []struct{ value, want string }{
			{"ckpt-missing", "PersistentVolumeClaim ckpt-missing does not exist in the job's namespace"},
			{"ckpt-node", "PersistentVolumeClaim ckpt-node cannot be shared by the job's pods: its access modes are [ReadWriteOnce]"},
			{"other/ckpt-shared", "a pod mounts claims of its own namespace only"},
			{"ckpt-shared:" + mpi.DefaultSSHPath, "would hide or collide with Torus's"},
		} {
			err := fw.Client.Create(ctx, job("ckpt-refused", tc.value))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want Invalid, got %v", tc.value, err)
			Expect(err.Error()).To(ContainSubstring("metadata.annotations[torus-mpi.io/checkpoint-volume]"))
			Expect(err.Error()).To(ContainSubstring(tc.want))
		}
		tj := job("ckpt-ok", "ckpt-shared:/data/ckpt")
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())

		By("the claim deleted: the job may still be suspended, but not pointed at another bad claim")
		var pvc corev1.PersistentVolumeClaim
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "ckpt-shared"}, &pvc)).To(Succeed())
		// Deleted, it waits for its protection finalizer (whose controller
		// does not run here), as a claim a pod still mounts does.
		Expect(fw.Client.Delete(ctx, &pvc)).To(Succeed())
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"torus-mpi.io/checkpoint-volume":"ckpt-node"}}}`)))).
			To(MatchError(ContainSubstring("cannot be shared by the job's pods")))
	})

	It("lets status and metadata updates through once the runtime is gone", func() {
		rt := wrappers.MakeMPIRuntime("wh-gone", "OpenMPI").Obj()
		Expect(fw.Client.Create(ctx, rt)).To(Succeed())
		tj := wrappers.MakeTrainJob("orphan", ns.Name).RuntimeRef("wh-gone").Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Expect(fw.Client.Delete(ctx, rt)).To(Succeed())
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"team":"a"}}}`)))).To(Succeed())
	})

	// One kubectl apply of a runtime and its job: the webhooks read
	// runtimes from the operator's cache, and from the API server when
	// the cache has not caught up (TestCacheFirst).
	It("admits and labels a TrainJob created right after its runtime", func() {
		for i := range 10 {
			rt := wrappers.MakeMPIRuntime(fmt.Sprintf("wh-fresh-%d", i), trainer.MPIImplementationOpenMPI).Obj()
			Expect(fw.Client.Create(ctx, rt)).To(Succeed())
			DeferCleanup(func() { Expect(fw.Client.Delete(ctx, rt)).To(Succeed()) })
			tj := wrappers.MakeTrainJob(fmt.Sprintf("fresh-%d", i), ns.Name).RuntimeRef(rt.Name).Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			Expect(tj.Labels).To(HaveKeyWithValue(api.LabelImplementation, string(mpi.OpenMPI)))
		}
	})
})

var _ = Describe("Samples", func() {
	It("are accepted by the API server and the webhooks", func(sctx SpecContext) {
		root := framework.RepoRoot()
		ns := fw.NewNamespace(sctx, "samples")
		for _, dir := range []string{"runtimes", "trainjobs"} {
			files, err := filepath.Glob(filepath.Join(root, "samples", dir, "*.yaml"))
			Expect(err).NotTo(HaveOccurred())
			Expect(files).NotTo(BeEmpty())
			for _, f := range files {
				for _, obj := range framework.ReadObjects(f) {
					if dir == "trainjobs" {
						obj.SetNamespace(ns.Name)
					}
					Expect(fw.Client.Create(ctx, obj)).To(Succeed(), "creating %s from %s", obj.GetName(), f)
				}
			}
		}
		var jobs trainer.TrainJobList
		Expect(fw.Client.List(ctx, &jobs, client.InNamespace(ns.Name))).To(Succeed())
		Expect(jobs.Items).To(HaveLen(len(samples.TrainJobNames())))
		for _, tj := range jobs.Items {
			Expect(tj.Labels).To(HaveKey(api.LabelImplementation), tj.Name)
		}
	})
})

var _ = Describe("Network samples", func() {
	It("are accepted by the API server", func() {
		for _, name := range []string{"mpi-networks", "team-a"} {
			Expect(client.IgnoreAlreadyExists(fw.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		}
		files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "samples", "networks", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).To(HaveLen(3))
		for _, f := range files {
			for _, obj := range framework.ReadObjects(f) {
				Expect(fw.Client.Create(ctx, obj)).To(Succeed(), "creating %s from %s", obj.GetName(), f)
			}
		}
	})
})

func withSSHPath(rt *trainer.ClusterTrainingRuntime, p string) *trainer.ClusterTrainingRuntime {
	rt.Spec.MLPolicy.MPI.SSHAuthMountPath = &p
	return rt
}

// annotated is a TrainJob of the admission runtime with one annotation.
func annotated(key, value string) func(ns string) *trainer.TrainJob {
	return func(ns string) *trainer.TrainJob {
		return wrappers.MakeTrainJob("annotated", ns).RuntimeRef("wh-openmpi").Annotation(key, value).Obj()
	}
}

func withProcsPerNode(rt *trainer.ClusterTrainingRuntime, n int32) *trainer.ClusterTrainingRuntime {
	rt.Spec.MLPolicy.MPI.NumProcPerNode = &n
	return rt
}

func withNumNodes(rt *trainer.ClusterTrainingRuntime, n int32) *trainer.ClusterTrainingRuntime {
	rt.Spec.MLPolicy.NumNodes = &n
	return rt
}

func withPodGroupPolicy(rt *trainer.ClusterTrainingRuntime) *trainer.ClusterTrainingRuntime {
	rt.Spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
		Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](60)}}}
	return rt
}

// warningsTo collects the API server's warnings, as kubectl prints them.
type warningsTo []string

func (w *warningsTo) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	*w = append(*w, text)
}
