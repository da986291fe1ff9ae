package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/corpus"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
)

const sshArgs = "-F /home/mpiuser/.ssh/config"

// plantedKeys is a Secret named as a job's keys and forged to look like
// Torus's: its label, its controller reference and a made-up stamp.
func plantedKeys(tj *trainer.TrainJob) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: mpi.SSHSecretName(tj.Name), Namespace: tj.Namespace,
			Labels:          map[string]string{api.LabelJobName: tj.Name},
			Annotations:     map[string]string{api.AnnotationJobSetRestarts: "0", api.AnnotationProof: "forged"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.SchemeGroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Data: map[string][]byte{"authorized_keys": []byte("ssh-ed25519 AAAA attacker")},
	}
}

func getJobSet(tj *trainer.TrainJob) func(Gomega) *jobsetv1alpha2.JobSet {
	return func(g Gomega) *jobsetv1alpha2.JobSet {
		var js jobsetv1alpha2.JobSet
		g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Name}, &js)).To(Succeed())
		return &js
	}
}

func getSecret(g Gomega, tj *trainer.TrainJob) *corev1.Secret {
	var s corev1.Secret
	g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Name + "-mpi-ssh"}, &s)).To(Succeed())
	return &s
}

// restartedSecret plays the JobSet controller's first restart of a job's
// JobSet and returns the SSH Secret Torus makes for the new run.
func restartedSecret(tj *trainer.TrainJob) *corev1.Secret {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		js := getJobSet(tj)(g)
		js.Status.Restarts = 1
		g.Expect(fw.Client.Status().Update(ctx, js)).To(Succeed())
	}, framework.Timeout, framework.Interval).Should(Succeed())
	var s *corev1.Secret
	Eventually(func(g Gomega) {
		s = getSecret(g, tj)
		g.Expect(s.Annotations).To(HaveKeyWithValue(api.AnnotationJobSetRestarts, "1"))
	}, framework.Timeout, framework.Interval).Should(Succeed())
	return s
}

func getTrainJob(tj *trainer.TrainJob) *trainer.TrainJob {
	GinkgoHelper()
	var got trainer.TrainJob
	Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &got)).To(Succeed())
	return &got
}

func condition(tj *trainer.TrainJob, typ string) func(Gomega) *metav1.Condition {
	return framework.Condition(ctx, fw.Client, tj, typ)
}

func container(js *jobsetv1alpha2.JobSet, rjob string) corev1.PodSpec {
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == rjob {
			return rj.Template.Spec.Template.Spec
		}
	}
	Fail("no replicated job " + rjob)
	return corev1.PodSpec{}
}

// setJobSetCondition plays the JobSet controller's part.
func setJobSetCondition(tj *trainer.TrainJob, typ jobsetv1alpha2.JobSetConditionType, reason, msg string) {
	Eventually(func(g Gomega) {
		js := getJobSet(tj)(g)
		meta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{Type: string(typ), Status: metav1.ConditionTrue, Reason: reason, Message: msg})
		g.Expect(fw.Client.Status().Update(ctx, js)).To(Succeed())
	}, framework.Timeout, framework.Interval).Should(Succeed())
}

// eventReasons polls the reasons of the events about a TrainJob.
func eventReasons(tj *trainer.TrainJob) func(Gomega) []string {
	return framework.EventReasons(ctx, fw.Client, tj)
}

var _ = Describe("MPI TrainJob", func() {
	var ns *corev1.Namespace
	BeforeEach(func(sctx SpecContext) { ns = fw.NewNamespace(sctx, "mpi") })

	DescribeTable("becomes a JobSet, hostfile and SSH Secret for each implementation",
		func(runtime string, wantLabel string, wantEnv func(slots string) []corev1.EnvVar, hostLine func(host string) string, wantSearch bool, agentVar string) {
			tj := wrappers.MakeTrainJob("pi", ns.Name).RuntimeRef(runtime).NumNodes(2).NumProcPerNode(2).
				Image("mpi-pi:test").Env("NCCL_DEBUG", "INFO").
				Resources(corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}).Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			Expect(tj.Labels).To(HaveKeyWithValue(api.LabelImplementation, wantLabel), "the defaulting webhook labels MPI jobs")

			By("creating the JobSet")
			js := getJobSet(tj)
			Eventually(js, framework.Timeout, framework.Interval).ShouldNot(BeNil())
			got := js(Default)
			Expect(metav1.IsControlledBy(got, tj)).To(BeTrue())
			Expect(got.Spec.SuccessPolicy.TargetReplicatedJobs).To(Equal([]string{"launcher"}))
			Expect(got.Spec.Network.Subdomain).To(Equal("pi"))
			launcher, node := container(got, "launcher"), container(got, "node")
			for _, rj := range got.Spec.ReplicatedJobs {
				want := map[string]int32{"launcher": 1, "node": 2}[rj.Name]
				Expect(*rj.Template.Spec.Parallelism).To(Equal(want), rj.Name)
				Expect(*rj.Template.Spec.CompletionMode).To(Equal(batchv1.IndexedCompletion), rj.Name)
				if rj.Name == "launcher" {
					// It starts with the workers, and waits for them.
					Expect(rj.DependsOn).To(BeEmpty())
				}
			}
			// The default runtimes launch through Torus's agent: its client
			// in ssh's place, with the job's key, known hosts and port.
			agentEnv := []corev1.EnvVar{
				{Name: agentVar, Value: "/opt/torus-mpi/bin/torus-ssh"},
				{Name: "TORUS_SSH_KEY", Value: "/home/mpiuser/.ssh/id_ed25519"},
				{Name: "TORUS_SSH_KNOWN_HOSTS", Value: "/home/mpiuser/.ssh/known_hosts"},
				{Name: "TORUS_SSH_PORT", Value: "2222"},
			}
			Expect(launcher.Containers[0].Env).To(Equal(slices.Concat([]corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}}, wantEnv("2"), agentEnv)))
			Expect(node.Containers[0].Env).To(Equal(slices.Concat([]corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}}, agentEnv)), "user env reaches workers; MPI env stays on the launcher")
			Expect(node.Containers[0].Command).To(Equal([]string{"/opt/torus-mpi/bin/torus-launch", "agent", "--listen=:2222",
				"--host-key=/home/mpiuser/.ssh/ssh_host_ed25519_key", "--authorized-keys=/home/mpiuser/.ssh/authorized_keys"}))
			Expect(node.Containers[0].Image).To(Equal("mpi-pi:test"))
			Expect(node.Containers[0].Resources.Limits.Memory().String()).To(Equal("1Gi"))
			Expect(launcher.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "mpi-hostfile", MountPath: "/etc/mpi", ReadOnly: true}))
			for _, ps := range []corev1.PodSpec{launcher, node} {
				Expect(ps.InitContainers[0].Name).To(Equal("mpi-ssh-setup"))
				Expect(ps.InitContainers[0].SecurityContext).To(Equal(ps.Containers[0].SecurityContext), "the set-up runs as restricted as the job")
				Expect(ps.InitContainers[0].Image).To(Equal(framework.LaunchImage), "the agent comes from the operator's image")
				Expect(ps.InitContainers[0].Command).To(Equal([]string{"/torus-launch"}))
				Expect(ps.InitContainers[0].Args).To(ContainElements("setup", "--link", "--install=/opt/torus-mpi/bin"))
				if wantSearch {
					Expect(ps.DNSConfig.Searches).To(Equal([]string{"pi." + ns.Name + ".svc.cluster.local"}))
				} else {
					Expect(ps.DNSConfig).To(BeNil())
				}
			}

			By("writing the hostfile into the job's Secret, whose hostfile alone the launcher mounts")
			Eventually(func(g Gomega) {
				var s corev1.Secret
				g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "pi-mpi-ssh"}, &s)).To(Succeed())
				g.Expect(string(s.Data["hostfile"])).To(Equal(hostLine("pi-node-0-0.pi") + hostLine("pi-node-0-1.pi")))
			}, framework.Timeout, framework.Interval).Should(Succeed())
			Expect(launcher.Volumes).To(ContainElement(corev1.Volume{Name: "mpi-hostfile", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "pi-mpi-ssh", Items: []corev1.KeyToPath{{Key: "hostfile", Path: "hostfile"}}, DefaultMode: ptr.To[int32](0o444),
			}}}))
			var configMaps corev1.ConfigMapList
			Expect(fw.Client.List(ctx, &configMaps, client.InNamespace(ns.Name), client.HasLabels{api.LabelJobName})).To(Succeed())
			Expect(configMaps.Items).To(BeEmpty(), "two objects a job: its JobSet and its Secret")

			By("generating ed25519 keys that agree with each other")
			Eventually(func(g Gomega) {
				s := getSecret(g, tj)
				g.Expect(s.Type).To(Equal(corev1.SecretTypeSSHAuth))
				g.Expect(ptr.Deref(s.Immutable, false)).To(BeTrue())
				g.Expect(metav1.IsControlledBy(s, tj)).To(BeTrue())
				client, err := ssh.ParsePrivateKey(s.Data["ssh-privatekey"])
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(client.PublicKey().Type()).To(Equal(ssh.KeyAlgoED25519))
				g.Expect(string(s.Data["authorized_keys"])).To(Equal(string(ssh.MarshalAuthorizedKey(client.PublicKey()))))
				host, err := ssh.ParsePrivateKey(s.Data["ssh_host_ed25519_key"])
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(host.PublicKey().Type()).To(Equal(ssh.KeyAlgoED25519))
				// The host key alone: every pod holds the client key.
				g.Expect(string(s.Data["known_hosts"])).To(Equal("[pi-launcher-*]:2222,[pi-node-*]:2222 " + string(ssh.MarshalAuthorizedKey(host.PublicKey()))))
				g.Expect(string(s.Data["config"])).To(ContainSubstring("StrictHostKeyChecking yes"))
				g.Expect(string(s.Data["sshd_config"])).To(ContainSubstring("Port 2222"))
			}, framework.Timeout, framework.Interval).Should(Succeed())

			By("writing no status until the JobSet controller reports on the JobSet")
			// But that it has not reported, once jobSetReportTimeout has
			// passed since the JobSet's creation: a loaded machine may get
			// there within this window.
			Consistently(func(g Gomega) []metav1.Condition {
				var got trainer.TrainJob
				g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &got)).To(Succeed())
				return got.Status.Conditions
			}, framework.ShortWindow, framework.Interval).Should(Or(BeEmpty(), ConsistOf(And(
				HaveField("Type", trainjob.ConditionCreated),
				HaveField("Status", metav1.ConditionUnknown),
				HaveField("Reason", trainjob.ReasonJobSetNotReported)))))

			By("reporting Created once it does")
			framework.ObserveJobSet(ctx, fw.Client, tj)
			Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
				HaveField("Status", metav1.ConditionTrue),
				HaveField("Reason", trainjob.ReasonJobSetCreated)))
		},
		Entry("Open MPI 4", "torus-openmpi", "OpenMPI", func(slots string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
				{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
				{Name: "OMPI_MCA_orte_set_default_slots", Value: slots},
				{Name: "OMPI_MCA_plm_rsh_args", Value: sshArgs},
				{Name: "OMPI_MCA_mca_base_env_list", Value: "NCCL_DEBUG"},
				{Name: "OMPI_MCA_btl_vader_single_copy_mechanism", Value: "none"},
			}
		}, func(h string) string { return h + " slots=2\n" }, false, "OMPI_MCA_plm_rsh_agent"),
		Entry("Open MPI 5", "torus-openmpi5", "OpenMPI5", func(string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: "PRTE_MCA_prte_default_hostfile", Value: "/etc/mpi/hostfile"},
				{Name: "PRTE_MCA_prte_keep_fqdn_hostnames", Value: "1"},
				{Name: "PRTE_MCA_plm_ssh_args", Value: sshArgs},
				{Name: "OMPI_MCA_mca_base_env_list", Value: "NCCL_DEBUG"},
			}
		}, func(h string) string { return h + " slots=2\n" }, false, "PRTE_MCA_plm_ssh_agent"),
		Entry("Intel MPI", "torus-intelmpi", "Intel", func(slots string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: "I_MPI_HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
				{Name: "I_MPI_HYDRA_BOOTSTRAP", Value: "ssh"},
				{Name: "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", Value: sshArgs},
				{Name: "I_MPI_PERHOST", Value: slots},
			}
		}, func(h string) string { return h + ":2\n" }, true, "I_MPI_HYDRA_BOOTSTRAP_EXEC"),
		Entry("MPICH", "torus-mpich", "MPICH", func(string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: "HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
				{Name: "HYDRA_LAUNCHER", Value: "ssh"},
				{Name: "HYDRA_LAUNCHER_EXTRA_ARGS", Value: sshArgs},
			}
		}, func(h string) string { return h + ":2\n" }, true, "HYDRA_LAUNCHER_EXEC"),
	)

	It("replaces the SSH keys when the job restarts", func() {
		tj := wrappers.MakeTrainJob("restart", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		var first []byte
		Eventually(func(g Gomega) { first = getSecret(g, tj).Data["ssh-privatekey"] }, framework.Timeout, framework.Interval).Should(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(HaveField("Status", metav1.ConditionTrue))

		By("suspending: the keys go and the JobSet is suspended")
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			err := fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "restart-mpi-ssh"}, &s)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "secret still exists: %v", err)
			g.Expect(ptr.Deref(getJobSet(tj)(g).Spec.Suspend, false)).To(BeTrue())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(condition(tj, trainer.TrainJobSuspended), framework.Timeout, framework.Interval).Should(HaveField("Status", metav1.ConditionTrue))

		By("resuming: new keys")
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
		var second []byte
		Eventually(func(g Gomega) {
			second = getSecret(g, tj).Data["ssh-privatekey"]
			g.Expect(ptr.Deref(getJobSet(tj)(g).Spec.Suspend, true)).To(BeFalse())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(second).NotTo(Equal(first))
		Eventually(condition(tj, trainer.TrainJobSuspended), framework.Timeout, framework.Interval).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "Resumed")))

		By("a JobSet restart: new keys again")
		Expect(restartedSecret(tj).Data["ssh-privatekey"]).NotTo(Equal(second))
		Eventually(eventReasons(tj), framework.Timeout, framework.Interval).Should(
			ContainElements("JobSetCreated", "Suspended", "SSHKeysDeleted", "Resumed", "SSHKeysCreated"),
			"keys made for a resumed or restarted run are announced; the first run's are named in JobSetCreated")
	})

	It("keeps an sshd configuration without StrictModes for a JobSet an earlier Torus made, across a restart", func() {
		tj := wrappers.MakeTrainJob("older", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(string(getSecret(g, tj).Data[mpi.SSHDaemonConfig])).To(ContainSubstring("StrictModes yes"))
		}, framework.Timeout, framework.Interval).Should(Succeed(), "a job Torus starts now: the SSH directory is laid out for StrictModes")
		framework.ObserveJobSet(ctx, fw.Client, tj)

		By("rewriting the JobSet's record as an earlier Torus wrote it (no StrictModes), then restarting the JobSet")
		Eventually(func(g Gomega) {
			js := getJobSet(tj)(g)
			job, ok := mpi.DecodeJob(js.Annotations[api.AnnotationJob])
			g.Expect(ok).To(BeTrue(), "the JobSet records the job")
			job.SSH.StrictModes = false
			record, err := mpi.EncodeJob(job)
			g.Expect(err).NotTo(HaveOccurred())
			js.Annotations[api.AnnotationJob] = record
			g.Expect(fw.Client.Update(ctx, js)).To(Succeed())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(string(restartedSecret(tj).Data[mpi.SSHDaemonConfig])).To(ContainSubstring("StrictModes no"),
			"its pods mount the emptyDir itself, world-writable, which StrictModes would refuse")
	})

	DescribeTable("deletes the keys when the job finishes unless told to keep them",
		func(keep bool) {
			w := wrappers.MakeTrainJob("done", ns.Name).RuntimeRef("torus-mpich").NumNodes(1)
			if keep {
				w.Annotation(api.AnnotationKeepSSHKeys, "true")
			}
			tj := w.Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			Eventually(func(g Gomega) { getSecret(g, tj) }, framework.Timeout, framework.Interval).Should(Succeed())
			setJobSetCondition(tj, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")
			Eventually(condition(tj, trainer.TrainJobComplete), framework.Timeout, framework.Interval).Should(HaveField("Status", metav1.ConditionTrue))
			Expect(framework.MetricValue("torus_trainjob_duration_seconds", map[string]string{"namespace": ns.Name, "result": "Succeeded"})).To(BeEquivalentTo(1))
			Eventually(func() float64 {
				return framework.MetricValue("torus_trainjobs", map[string]string{"namespace": ns.Name, "state": trainjob.PhaseComplete})
			}, framework.Timeout, framework.Interval).Should(BeEquivalentTo(1))
			if keep {
				Consistently(func(g Gomega) { getSecret(g, tj) }, framework.ShortWindow, framework.Interval).Should(Succeed())
				return
			}
			Eventually(func() bool {
				err := fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "done-mpi-ssh"}, &corev1.Secret{})
				return apierrors.IsNotFound(err)
			}, framework.Timeout, framework.Interval).Should(BeTrue())
		},
		Entry("deleted by default", false),
		Entry("kept with torus-mpi.io/keep-ssh-keys", true),
	)

	It("names the failing rank, the cause and the fix", func() {
		tj := wrappers.MakeTrainJob("oom", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).NumProcPerNode(4).
			Resources(corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}}).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		js := getJobSet(tj)
		Eventually(js, framework.Timeout, framework.Interval).ShouldNot(BeNil())
		framework.ObserveJobSet(ctx, fw.Client, tj)

		By("a worker killed for memory, as the kubelet reports it")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "oom-node-0-1-x7k2p", Namespace: ns.Name, Labels: map[string]string{
				api.LabelJobName: "oom", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "1",
			}},
			Spec: container(js(Default), "node"),
		}
		pod.Spec.NodeName = "node-a"
		framework.ControlledBy(pod, framework.JobOf(ctx, fw.Client, tj, "node"))
		Expect(fw.Client.Create(ctx, pod)).To(Succeed())
		pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.Now()}},
		}}}
		Expect(fw.Client.Status().Update(ctx, pod)).To(Succeed())
		// The operator names the cause from the pods in its cache when it
		// sees the JobSet fail, once: the pod's watch event, on a stream of
		// its own, must have come first, as the Job and JobSet controllers'
		// own reactions to it make sure in a cluster.
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", trainjob.ReasonPodProblem), HaveField("Message", ContainSubstring("[pod oom-node-0-1-x7k2p]"))))
		setJobSetCondition(tj, jobsetv1alpha2.JobSetFailed, "FailedJobs", "jobset failed due to one or more job failures")

		Eventually(condition(tj, trainer.TrainJobFailed), framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", "worker-1 (ranks 4-7) OOMKilled: memory limit 16Gi exceeded; raise --memory (spec.trainer.resourcesPerNode limits) [pod oom-node-0-1-x7k2p]"),
		))
		Eventually(eventReasons(tj), framework.Timeout, framework.Interval).Should(ContainElements("JobSetCreated", "Failed"))
		Expect(eventReasons(tj)(Default)).NotTo(ContainElement("SSHKeysCreated"), "the first run's keys are named in JobSetCreated")
		// The failure metric counts the job by its cause.
		Expect(framework.MetricValue("torus_trainjobs_failed_total", map[string]string{"namespace": ns.Name, "reason": "OOMKilled"})).To(BeEquivalentTo(1))
	})

	It("names a GPU program's failure in the program's own words, from the end of the launcher's output", func() {
		// Two NCCL ranks on one GPU, as recorded on a real one (without
		// the recorder's "[exit code ...]" notes).
		recorded, err := os.ReadFile(filepath.Join(corpus.Dir("gpu-failures"), "nccl-duplicate-gpu.txt"))
		Expect(err).NotTo(HaveOccurred())
		tj := wrappers.MakeTrainJob("dupgpu", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).NumProcPerNode(2).
			Resources(corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		js := getJobSet(tj)
		Eventually(js, framework.Timeout, framework.Interval).ShouldNot(BeNil())
		framework.ObserveJobSet(ctx, fw.Client, tj)

		pod := func(name, rjob, role string, status corev1.PodStatus) {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: map[string]string{
					api.LabelJobName: "dupgpu", api.LabelRole: role, "batch.kubernetes.io/job-completion-index": "0",
				}},
				Spec: container(js(Default), rjob),
			}
			p.Spec.NodeName = "node-a"
			framework.ControlledBy(p, framework.JobOf(ctx, fw.Client, tj, rjob))
			Expect(fw.Client.Create(ctx, p)).To(Succeed())
			p.Status = status
			Expect(fw.Client.Status().Update(ctx, p)).To(Succeed())
		}
		By("a worker given one GPU, and a launcher whose ranks failed in NCCL, as the kubelet keeps its output")
		pod("dupgpu-node-0-0-a1b2c", "node", api.RoleWorker, corev1.PodStatus{Phase: corev1.PodRunning})
		pod("dupgpu-launcher-0-0-d3e4f", "launcher", api.RoleLauncher, corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.Now(),
				Message: corpus.KubeletTail(corpus.Program(string(recorded)))}},
		}}})
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", trainjob.ReasonPodProblem), HaveField("Message", ContainSubstring("[pod dupgpu-launcher-0-0-d3e4f]"))))
		setJobSetCondition(tj, jobsetv1alpha2.JobSetFailed, "FailedJobs", "jobset failed due to one or more job failures")

		Eventually(condition(tj, trainer.TrainJobFailed), framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", And(
				HavePrefix("launcher NCCLDuplicateGPU: container node exited with code 1: NCCL ranks 0 and 1 share one GPU (CUDA device 60)"),
				ContainSubstring("the job runs 2 ranks per worker on 1 GPU: make them equal (--slots-per-worker 1, or --gpus 2)"),
				ContainSubstring("Duplicate GPU detected"))),
		))
		Expect(framework.MetricValue("torus_trainjobs_failed_total", map[string]string{"namespace": ns.Name, "reason": "NCCLDuplicateGPU"})).To(BeEquivalentTo(1))
	})

	It("counts as its pods only those of its own Jobs, not pods that wear its labels or name its Job falsely", func() {
		tj := wrappers.MakeTrainJob("worn", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(HaveField("Reason", "Pending"))
		node := framework.JobOf(ctx, fw.Client, tj, "node")
		killed := func(name string) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: map[string]string{
					api.LabelJobName: "worn", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": "0",
				}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "node", Image: "mpi"}}},
			}
		}
		fail := func(p *corev1.Pod) {
			GinkgoHelper()
			Expect(fw.Client.Create(ctx, p)).To(Succeed())
			p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.Now()}},
			}}}
			Expect(fw.Client.Status().Update(ctx, p)).To(Succeed())
		}

		By("a pod that wears the job's labels, and one that names its Job with another UID")
		fail(killed("worn-labels-only"))
		forged := killed("worn-forged-owner")
		forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: node.Name, UID: "d5e4c3b2-0000-4000-8000-000000000000", Controller: ptr.To(true)}}
		fail(forged)
		Consistently(condition(tj, trainjob.ConditionRunning), framework.ShortWindow, framework.Interval).Should(And(
			HaveField("Reason", "Pending"), HaveField("Message", Not(ContainSubstring("OOMKilled")))))

		By("a pod of the job's own Job")
		own := killed("worn-node-0-0-x7k2p")
		framework.ControlledBy(own, node)
		fail(own)
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", trainjob.ReasonPodProblem), HaveField("Message", MatchRegexp(`^worker-0 \(ranks? [0-9-]+\) OOMKilled`)),
			HaveField("Message", ContainSubstring("[pod worn-node-0-0-x7k2p]"))))
	})

	It("tells a JobSet controller busy with other JobSets from one that reports on none", func() {
		behind := wrappers.MakeTrainJob("behind", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		Expect(fw.Client.Create(ctx, behind)).To(Succeed())
		Eventually(getJobSet(behind), framework.Timeout, framework.Interval).ShouldNot(BeNil())
		busy := wrappers.MakeTrainJob("busy", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		Expect(fw.Client.Create(ctx, busy)).To(Succeed())
		Eventually(getJobSet(busy), framework.Timeout, framework.Interval).ShouldNot(BeNil())

		By("the controller reporting on a JobSet made after this one's, for longer than the report timeout")
		reporting, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for i := int32(1); ; i++ {
				var js jobsetv1alpha2.JobSet
				if err := fw.Client.Get(reporting, client.ObjectKeyFromObject(busy), &js); err == nil {
					js.Status.ReplicatedJobsStatus = nil
					for _, rj := range js.Spec.ReplicatedJobs {
						js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: rj.Name, Active: i})
					}
					_ = fw.Client.Status().Update(reporting, &js) // a conflict waits for the next report
				}
				select {
				case <-reporting.Done():
					return
				case <-time.After(jobSetReportTimeout / 8):
				}
			}
		}()
		stopReporting := func() { cancel(); <-done }
		DeferCleanup(stopReporting)
		Eventually(condition(behind, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionUnknown),
			HaveField("Reason", trainjob.ReasonJobSetPending),
			HaveField("Message", ContainSubstring("the JobSet controller is busy with other JobSets and has not started this one in "+jobSetReportTimeout.String())),
		))
		Consistently(condition(behind, trainjob.ConditionCreated), 2*jobSetReportTimeout, framework.Interval).Should(
			HaveField("Reason", trainjob.ReasonJobSetPending))
		Expect(eventReasons(behind)(Default)).NotTo(ContainElement(trainjob.ReasonJobSetNotReported))

		By("saying what to check once it reports on none for the report timeout")
		stopReporting()
		Eventually(condition(behind, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", trainjob.ReasonJobSetNotReported),
			HaveField("Message", ContainSubstring("kubectl mpi doctor"))))
	})

	It("says what to check when the JobSet controller does not report on the JobSet", func() {
		tj := wrappers.MakeTrainJob("silent", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionUnknown),
			HaveField("Reason", trainjob.ReasonJobSetNotReported),
			HaveField("Message", ContainSubstring("the JobSet controller has not reported on it in "+jobSetReportTimeout.String())),
			HaveField("Message", ContainSubstring("kubectl mpi doctor")),
		))
		Eventually(eventReasons(tj), framework.Timeout, framework.Interval).Should(ContainElement(trainjob.ReasonJobSetNotReported))

		By("reporting Created once it does")
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(
			HaveField("Status", metav1.ConditionTrue))
	})

	It("reports a job created suspended before the JobSet controller reports, and keeps no keys", func() {
		tj := wrappers.MakeTrainJob("held", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		tj.Spec.Suspend = ptr.To(true)
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainer.TrainJobSuspended), framework.Timeout, framework.Interval).Should(
			HaveField("Status", metav1.ConditionTrue), "activeDeadlineSeconds counts from the resume, so the suspension is recorded at once")
		Consistently(func() bool {
			return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "held-mpi-ssh"}, &corev1.Secret{}))
		}, framework.ShortWindow, framework.Interval).Should(BeTrue())
	})

	It("deletes the keys of a job suspended right after it was created", func() {
		tj := wrappers.MakeTrainJob("quick", ns.Name).RuntimeRef("torus-mpich").NumNodes(1).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(func(g Gomega) { getSecret(g, tj) }, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "quick-mpi-ssh"}, &corev1.Secret{}))
		}, framework.Timeout, framework.Interval).Should(BeTrue())

		By("resuming at once: new keys without waiting for the cache")
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
		Eventually(func(g Gomega) { getSecret(g, tj) }, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("refuses jobs too large to run even when the webhook was bypassed, and keeps running the others", Serial, func() {
		// As when the webhook is not installed, or fails open.
		var hook admissionregistrationv1.ValidatingWebhookConfiguration
		Expect(fw.Client.Get(ctx, client.ObjectKey{Name: "validating-webhook-configuration"}, &hook)).To(Succeed())
		// The API server calls the webhooks its informer holds: a deleted
		// or created configuration takes effect a moment later. A dry run
		// of a job only the webhook refuses says when.
		probe := wrappers.MakeTrainJob("probe", ns.Name).RuntimeRef("torus-openmpi").NumNodes(math.MaxInt32).Obj()
		dryRun := func() error { return fw.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll) }
		Expect(fw.Client.Delete(ctx, &hook)).To(Succeed())
		DeferCleanup(func() {
			hook.ResourceVersion, hook.UID = "", ""
			Expect(fw.Client.Create(ctx, &hook)).To(Succeed())
			// The specs that follow count on it.
			Eventually(dryRun, framework.Timeout, framework.Interval).Should(
				MatchError(ContainSubstring(`admission webhook "vtrainjob.torus-mpi.io" denied the request`)))
		})
		Eventually(dryRun, framework.Timeout, framework.Interval).Should(Succeed(), "the API server still calls the deleted webhook")
		for _, tc := range []struct {
			name, reason, message string
			nodes                 int32
		}{
			{"huge", "InvalidMPIJob", "numNodes is 2147483647: Torus runs at most 65536 nodes a job", math.MaxInt32},
			{"large", "JobTooLarge", "numNodes is 20000, more than the 16384 nodes this Torus operator runs (its --max-nodes)", 20000},
		} {
			tj := wrappers.MakeTrainJob(tc.name, ns.Name).RuntimeRef("torus-openmpi").NumNodes(tc.nodes).Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", tc.reason),
				HaveField("Message", ContainSubstring(tc.message)),
			))
			Expect(apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: mpi.SSHSecretName(tc.name)}, &corev1.Secret{}))).To(BeTrue())
		}
		By("the operator still runs other jobs")
		tj := wrappers.MakeTrainJob("small", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(getJobSet(tj), framework.Timeout, framework.Interval).ShouldNot(BeNil())
	})

	DescribeTable("never uses a child made in advance by someone else, and says so",
		func(squat func(ns string) client.Object, labelled bool) {
			obj := squat(ns.Name)
			if labelled {
				obj.SetLabels(map[string]string{api.LabelJobName: "squat"})
			}
			Expect(fw.Client.Create(ctx, obj)).To(Succeed())
			tj := wrappers.MakeTrainJob("squat", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
			Expect(fw.Client.Create(ctx, tj)).To(Succeed())
			Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", "ChildConflict"),
				HaveField("Message", ContainSubstring(fmt.Sprintf("%s %s exists and Torus did not make it for TrainJob squat", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName()))),
				HaveField("Message", ContainSubstring("delete it, or give the TrainJob another name")),
			))
			Consistently(func() bool {
				return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}))
			}, framework.ShortWindow, framework.Interval).Should(BeTrue(), "a JobSet was created whose pods would mount another's object")
			Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "Torus deleted an object that is not its own")

			if labelled {
				By("the object in the way deleted: the job starts at its next look (it owns nothing whose events would say so)")
				Expect(fw.Client.Delete(ctx, obj)).To(Succeed())
				Eventually(getJobSet(tj), 3*framework.Timeout, framework.Interval).ShouldNot(BeNil())
			}
		},
		Entry("an SSH Secret without Torus's label (not in its cache)", func(ns string) client.Object {
			return &corev1.Secret{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "squat-mpi-ssh", Namespace: ns},
				Data: map[string][]byte{"authorized_keys": []byte("ssh-ed25519 AAAA attacker")}}
		}, false),
		Entry("an SSH Secret with Torus's label", func(ns string) client.Object {
			return &corev1.Secret{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "squat-mpi-ssh", Namespace: ns},
				Data: map[string][]byte{"authorized_keys": []byte("ssh-ed25519 AAAA attacker")}}
		}, true),
	)

	It("never uses keys planted while a job waits, though they name the job as their controller and carry its label", func() {
		tj := wrappers.MakeTrainJob("planted", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Suspend(true).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(getJobSet(tj), framework.Timeout, framework.Interval).ShouldNot(BeNil())
		tj = getTrainJob(tj)
		planted := plantedKeys(tj)
		Expect(fw.Client.Create(ctx, planted)).To(Succeed())

		By("resuming the job")
		Eventually(func() error {
			got := getTrainJob(tj)
			got.Spec.Suspend = ptr.To(false)
			return fw.Client.Update(ctx, got)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", "ChildConflict"),
			HaveField("Message", ContainSubstring("Secret planted-mpi-ssh exists and Torus did not make it for TrainJob planted")),
		))
		Consistently(func(g Gomega) {
			js := getJobSet(tj)(g)
			g.Expect(js).NotTo(BeNil())
			g.Expect(ptr.Deref(js.Spec.Suspend, false)).To(BeTrue(), "the JobSet was resumed with keys Torus did not make")
			var s corev1.Secret
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(planted), &s)).To(Succeed(), "Torus deleted a Secret it did not make")
			g.Expect(s.UID).To(Equal(planted.UID))
		}, framework.ShortWindow, framework.Interval).Should(Succeed())

		By("the planted Secret deleted: Torus makes the job's keys and resumes it")
		Expect(fw.Client.Delete(ctx, planted)).To(Succeed())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(planted), &s)).To(Succeed())
			g.Expect(s.Annotations).To(HaveKey(api.AnnotationProof))
			g.Expect(s.Annotations[api.AnnotationProof]).NotTo(Equal("forged"))
			g.Expect(ptr.Deref(getJobSet(tj)(g).Spec.Suspend, true)).To(BeFalse())
		}, 3*framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("takes a restarted run's keys only from data it made, though a copy of its Secret carries its stamps", func() {
		tj := wrappers.MakeTrainJob("copied", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		var real *corev1.Secret
		Eventually(func(g Gomega) { real = getSecret(g, tj) }, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(real.Annotations).To(HaveKey(api.AnnotationProofData))

		By("someone who read the job's Secret replaces it with a copy of chosen keys, stamps and all")
		copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: real.Name, Namespace: real.Namespace,
			Labels: real.Labels, Annotations: real.Annotations, OwnerReferences: real.OwnerReferences}, Type: real.Type, Data: maps.Clone(real.Data)}
		copied.Data[mpi.SSHPrivateKey] = []byte("the attacker's key")
		// The operator makes the job's keys again as soon as they go, so the
		// copy may find the name taken: delete whatever stands there and try
		// again until the copy is in place.
		Eventually(func(g Gomega) {
			current := getSecret(g, tj)
			g.Expect(client.IgnoreNotFound(fw.Client.Delete(ctx, current, client.Preconditions{UID: ptr.To(current.UID)}))).To(Succeed())
			attempt := copied.DeepCopy()
			g.Expect(fw.Client.Create(ctx, attempt)).To(Succeed())
			copied = attempt
		}, framework.Timeout, framework.Interval).Should(Succeed())

		By("the JobSet restarts: the copy's keys are not taken, and the conflict is named")
		Eventually(func(g Gomega) {
			js := getJobSet(tj)(g)
			js.Status.Restarts = 1
			g.Expect(fw.Client.Status().Update(ctx, js)).To(Succeed())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", "ChildConflict"),
			HaveField("Message", ContainSubstring("Secret copied-mpi-ssh exists and Torus did not make it for TrainJob copied")),
		))
		var s corev1.Secret
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(copied), &s)).To(Succeed(), "Torus deleted a Secret it did not make")
		Expect(s.UID).To(Equal(copied.UID))
	})

	It("holds a queued run's pods back after restarts in a row that were not the program's, and then lets them start", func() {
		tj := wrappers.MakeTrainJob("backoff", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: "team"}
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)

		By("Kueue admitting the job: it resumes the JobSet")
		Eventually(func(g Gomega) {
			js := getJobSet(tj)(g)
			js.Spec.Suspend = ptr.To(false)
			g.Expect(fw.Client.Update(ctx, js)).To(Succeed())
		}, framework.Timeout, framework.Interval).Should(Succeed())

		notBefore, wait := restartTwiceNotForTheProgram(tj)

		By("the Job controller creating run 2's worker, behind Torus's gate")
		js := getJobSet(tj)(Default)
		template := *js.Spec.ReplicatedJobs[1].Template.Spec.Template.DeepCopy()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backoff-node-0-0-x", Namespace: ns.Name, Labels: template.Labels}, Spec: template.Spec}
		pod.Labels[jobsetv1alpha2.JobSetNameKey] = js.Name
		pod.Labels[mpi.LabelJobSetRestartAttempt] = "2"
		pod.Labels[batchv1.JobCompletionIndexAnnotation] = "0"
		framework.ControlledBy(pod, framework.JobOf(ctx, fw.Client, tj, mpi.NodeJob))
		Expect(fw.Client.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: api.SchedulingGateSSHKeys}))

		By("the gate lifted once the back-off, counted from the restart, is over, and not before")
		Eventually(func(g Gomega) []corev1.PodSchedulingGate {
			var got corev1.Pod
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got)).To(Succeed())
			// Read before this moment: a pod seen ungated before the
			// back-off's end was ungated before it.
			if seen := time.Now(); len(got.Spec.SchedulingGates) == 0 {
				Expect(seen).To(BeTemporally(">=", notBefore), "the pod was let onto a node before its back-off ended")
			}
			return got.Spec.SchedulingGates
		}, framework.Timeout+wait, framework.Interval).Should(BeEmpty())
	})

	It("holds a run outside Kueue back after restarts in a row that were not the program's, its JobSet suspended by Torus, then resumes it", func() {
		tj := wrappers.MakeTrainJob("backoff-direct", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Expect(ptr.Deref(getJobSet(tj)(Default).Spec.Suspend, false)).To(BeFalse(), "a job outside Kueue starts at once")

		notBefore, wait := restartTwiceNotForTheProgram(tj)

		By("run 2 waits: the JobSet suspended by Torus, the job Restarting until the back-off's end")
		Eventually(func(g Gomega) {
			js := getJobSet(tj)(g)
			g.Expect(ptr.Deref(js.Spec.Suspend, false)).To(BeTrue())
			g.Expect(js.Annotations).To(HaveKeyWithValue(api.AnnotationSuspendedByTorus, "true"))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", trainjob.ReasonRestarting),
			HaveField("Message", ContainSubstring("The new run waits until "+notBefore.UTC().Format(time.RFC3339))),
		))

		By("resumed once the back-off, counted from the restart, is over, and not before")
		Eventually(func(g Gomega) bool {
			js := getJobSet(tj)(g)
			// Read before this moment: a JobSet seen running before the
			// back-off's end was resumed before it.
			if seen := time.Now(); !ptr.Deref(js.Spec.Suspend, false) {
				Expect(seen).To(BeTemporally(">=", notBefore), "the run started before its back-off ended")
				g.Expect(js.Annotations).NotTo(HaveKey(api.AnnotationSuspendedByTorus))
			}
			return ptr.Deref(js.Spec.Suspend, false)
		}, framework.Timeout+wait, framework.Interval).Should(BeFalse())
	})

	It("holds the pods of a job Kueue resumes until Torus has made that run's keys, and while a planted Secret stands in their place", func() {
		tj := wrappers.MakeTrainJob("gated", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: "team"}
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		tj = getTrainJob(tj)
		var js jobsetv1alpha2.JobSet
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js)).To(Succeed())
		Expect(ptr.Deref(js.Spec.Suspend, false)).To(BeTrue(), "the JobSet waits suspended for Kueue")
		for _, rj := range js.Spec.ReplicatedJobs {
			Expect(rj.Template.Spec.Template.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: api.SchedulingGateSSHKeys}), rj.Name)
		}

		By("a Secret planted under the keys' name while the job waits, forged to look like Torus's")
		planted := plantedKeys(tj)
		Expect(fw.Client.Create(ctx, planted)).To(Succeed())

		By("Kueue resuming the JobSet, and the Job controller creating a worker from its template")
		patch := client.MergeFrom(js.DeepCopy())
		js.Spec.Suspend = ptr.To(false)
		Expect(fw.Client.Patch(ctx, &js, patch)).To(Succeed())
		job := framework.JobOf(ctx, fw.Client, tj, mpi.NodeJob)
		template := js.Spec.ReplicatedJobs[0].Template.Spec.Template
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-0-x", Namespace: ns.Name, Labels: template.Labels},
			Spec:       template.Spec,
		}
		pod.Labels[batchv1.JobCompletionIndexAnnotation] = "0"
		pod.Labels[jobsetv1alpha2.JobSetNameKey] = js.Name
		pod.Labels[mpi.LabelJobSetRestartAttempt] = "0"
		framework.ControlledBy(pod, job)
		Expect(fw.Client.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: api.SchedulingGateSSHKeys}),
			"a pod was admitted ungated while the keys' name held a Secret Torus did not make")
		gates := func(g Gomega) []corev1.PodSchedulingGate {
			var got corev1.Pod
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got)).To(Succeed())
			return got.Spec.SchedulingGates
		}
		Eventually(condition(tj, trainjob.ConditionCreated), framework.Timeout, framework.Interval).Should(And(
			HaveField("Reason", "ChildConflict"),
			HaveField("Message", ContainSubstring("Secret gated-mpi-ssh exists and Torus did not make it for TrainJob gated")),
		))
		Consistently(gates, framework.ShortWindow, framework.Interval).Should(ContainElement(corev1.PodSchedulingGate{Name: api.SchedulingGateSSHKeys}),
			"a pod was let onto a node while the keys' name held a Secret Torus did not make")

		By("the planted Secret deleted: Torus makes the run's keys, then lets the pod be scheduled")
		Expect(fw.Client.Delete(ctx, planted)).To(Succeed())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(planted), &s)).To(Succeed())
			g.Expect(s.Annotations[api.AnnotationProof]).NotTo(Or(BeEmpty(), Equal("forged")))
			g.Expect(gates(g)).To(BeEmpty())
		}, 3*framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("admits the first run's pods without the gate once Torus has made the run's keys, and a restarted run's behind it", func() {
		tj := wrappers.MakeTrainJob("admitted", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: "team"}
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		tj = getTrainJob(tj)

		By("Kueue resuming the JobSet: Torus makes the first run's keys")
		var js jobsetv1alpha2.JobSet
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js)).To(Succeed())
		patch := client.MergeFrom(js.DeepCopy())
		js.Spec.Suspend = ptr.To(false)
		Expect(fw.Client.Patch(ctx, &js, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: mpi.SSHSecretName(tj.Name)}, &s)).To(Succeed())
			g.Expect(s.Annotations).To(HaveKeyWithValue(api.AnnotationJobSetRestarts, "0"))
		}, framework.Timeout, framework.Interval).Should(Succeed())

		job := framework.JobOf(ctx, fw.Client, tj, mpi.NodeJob)
		var template corev1.PodTemplateSpec
		for _, rj := range js.Spec.ReplicatedJobs {
			if rj.Name == mpi.NodeJob {
				template = *rj.Template.Spec.Template.DeepCopy()
			}
		}
		worker := func(name, run string) *corev1.Pod {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: maps.Clone(template.Labels)}, Spec: *template.Spec.DeepCopy()}
			pod.Labels[jobsetv1alpha2.JobSetNameKey] = js.Name
			pod.Labels[mpi.LabelJobSetRestartAttempt] = run
			framework.ControlledBy(pod, job)
			return pod
		}

		By("the Job controller creating a worker of the first run: admitted without Torus's gate, by no write of Torus's, and with every other gate")
		// The webhook reads the keys from the operator's cache, which sees
		// the Secret after the API server does: until then a worker is
		// admitted gated, and each try is a new worker.
		topology := corev1.PodSchedulingGate{Name: "kueue.x-k8s.io/topology"}
		try := 0
		Eventually(func(g Gomega) {
			try++
			first := worker(fmt.Sprintf("admitted-node-0-0-%d", try), "0")
			first.Spec.SchedulingGates = append([]corev1.PodSchedulingGate{topology}, first.Spec.SchedulingGates...)
			g.Expect(first.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: api.SchedulingGateSSHKeys}))
			g.Expect(fw.Client.Create(ctx, first)).To(Succeed())
			g.Expect(first.Spec.SchedulingGates).To(Equal([]corev1.PodSchedulingGate{topology}),
				"the API server stored the pod with Torus's gate, or without another's")
		}, framework.Timeout, framework.Interval).Should(Succeed())

		By("a worker of a later run, whose keys are not made yet: admitted behind the gate")
		later := worker("admitted-node-0-1-x", "1")
		Expect(fw.Client.Create(ctx, later)).To(Succeed())
		Expect(later.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: api.SchedulingGateSSHKeys}))
	})

	It("makes a queued job's keys once Kueue reserves its quota, before Kueue resumes its JobSet, and deletes them when Kueue evicts it", func() {
		tj := wrappers.MakeTrainJob("reserved", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: "team"}
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		js := getJobSet(tj)(Default)
		Expect(ptr.Deref(js.Spec.Suspend, false)).To(BeTrue(), "the JobSet waits suspended for Kueue")
		keys := client.ObjectKey{Namespace: ns.Name, Name: mpi.SSHSecretName(tj.Name)}
		// uid is the keys' Secret's UID, "" while there is none.
		uid := func(g Gomega) types.UID {
			var s corev1.Secret
			err := fw.Client.Get(ctx, keys, &s)
			if apierrors.IsNotFound(err) {
				return ""
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Annotations).To(HaveKeyWithValue(api.AnnotationJobSetRestarts, "0"))
			return s.UID
		}

		By("Kueue queueing the JobSet's workload, with no quota for it yet: no keys")
		wl := workloadOf(js, 2)
		Expect(fw.Client.Create(ctx, wl)).To(Succeed())
		setWorkloadConditions := func(conds ...metav1.Condition) {
			Eventually(func(g Gomega) {
				g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(wl), wl)).To(Succeed())
				for _, c := range conds {
					c.LastTransitionTime = metav1.Now()
					meta.SetStatusCondition(&wl.Status.Conditions, c)
				}
				g.Expect(fw.Client.Status().Update(ctx, wl)).To(Succeed())
			}, framework.Timeout, framework.Interval).Should(Succeed())
		}
		setWorkloadConditions(metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: "couldn't assign flavors"})
		Eventually(condition(tj, trainjob.ConditionAdmitted), framework.Timeout, framework.Interval).Should(HaveField("Message", ContainSubstring("couldn't assign flavors")))
		Consistently(uid, framework.ShortWindow, framework.Interval).Should(BeEmpty(), "keys made for a job that waits for quota")

		By("Kueue reserving the quota: the keys are made while the JobSet is still suspended, once")
		reserve := func() {
			setWorkloadConditions(
				metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", Message: "Quota reserved in ClusterQueue team"},
				metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: "QuotaReserved", Message: "Previously: Preempted"})
		}
		reserve()
		Eventually(uid, framework.Timeout, framework.Interval).ShouldNot(BeEmpty())
		first := uid(Default)
		Consistently(uid, framework.ShortWindow, framework.Interval).Should(Equal(first), "the keys of a reserved job were deleted or made again")
		Expect(ptr.Deref(getJobSet(tj)(Default).Spec.Suspend, false)).To(BeTrue(), "Torus resumed a JobSet that is Kueue's to resume")

		By("Kueue evicting the workload before it resumed the JobSet: the keys go")
		setWorkloadConditions(metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a workload due to prioritization in the ClusterQueue"})
		Eventually(uid, framework.Timeout, framework.Interval).Should(BeEmpty())

		By("Kueue reserving the quota again: new keys")
		reserve()
		Eventually(uid, framework.Timeout, framework.Interval).Should(And(Not(BeEmpty()), Not(Equal(first))))
		second := uid(Default)

		By("Kueue evicting the workload and reserving its quota again between two looks of the operator: new keys, though it never saw the job evicted")
		var made corev1.Secret
		Expect(fw.Client.Get(ctx, keys, &made)).To(Succeed())
		Expect(made.Annotations).To(HaveKey(api.AnnotationQuotaReserved), "the keys record the reservation they were made for")
		// One status write holds both: the quota reserved anew, a second
		// after the reservation the keys were made for.
		Eventually(func(g Gomega) {
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(wl), wl)).To(Succeed())
			c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Add(time.Second))
			g.Expect(fw.Client.Status().Update(ctx, wl)).To(Succeed())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(uid, framework.Timeout, framework.Interval).Should(And(Not(BeEmpty()), Not(Equal(second))))
		third := uid(Default)
		Consistently(uid, framework.ShortWindow, framework.Interval).Should(Equal(third), "keys made for the current reservation replaced again")
	})

	It("tells a launcher that waits for its workers when every worker of its run is Ready, and no other launcher", func() {
		tj := wrappers.MakeTrainJob("ready", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		tj = getTrainJob(tj)
		var js jobsetv1alpha2.JobSet
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js)).To(Succeed())

		By("the Job controller creating the launcher and two workers from their templates")
		podOf := func(replicatedJob, name string) *corev1.Pod {
			var template corev1.PodTemplateSpec
			for _, rj := range js.Spec.ReplicatedJobs {
				if rj.Name == replicatedJob {
					template = *rj.Template.Spec.Template.DeepCopy()
				}
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: template.Labels},
				Spec:       template.Spec,
			}
			pod.Labels[jobsetv1alpha2.JobSetNameKey] = js.Name
			pod.Labels[mpi.LabelJobSetRestartAttempt] = "0"
			framework.ControlledBy(pod, framework.JobOf(ctx, fw.Client, tj, replicatedJob))
			Expect(fw.Client.Create(ctx, pod)).To(Succeed())
			return pod
		}
		launcher := podOf(mpi.LauncherJob, "ready-launcher-0-0-x")
		workers := []*corev1.Pod{podOf(mpi.NodeJob, "ready-node-0-0-x"), podOf(mpi.NodeJob, "ready-node-0-1-x")}
		setStatus := func(pod *corev1.Pod, status corev1.PodStatus) {
			GinkgoHelper()
			Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			pod.Status = status
			Expect(fw.Client.Status().Update(ctx, pod)).To(Succeed())
		}
		// The runtime's launcher waits ahead of its command, in its own
		// container; a launcher without a command, in an init container.
		var waiting string
		var initWaits bool
		for _, c := range append(slices.Clone(launcher.Spec.InitContainers), launcher.Spec.Containers...) {
			if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == mpi.PodInfoVolume }) {
				waiting = c.Name
				initWaits = slices.ContainsFunc(launcher.Spec.InitContainers, func(i corev1.Container) bool { return i.Name == c.Name })
			}
		}
		Expect(waiting).NotTo(BeEmpty(), "no container of the launcher reads the workers-ready mark")
		waitIs := func(phase corev1.PodPhase, state corev1.ContainerState) corev1.PodStatus {
			st := corev1.PodStatus{Phase: phase}
			if initWaits {
				st.InitContainerStatuses = []corev1.ContainerStatus{{Name: waiting, State: state}}
			} else {
				st.ContainerStatuses = []corev1.ContainerStatus{{Name: waiting, State: state}}
			}
			return st
		}
		setStatus(launcher, waitIs(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}))
		readyStatus := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		mark := func(g Gomega) string {
			var got corev1.Pod
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(launcher), &got)).To(Succeed())
			return got.Annotations[api.AnnotationWorkersReady]
		}

		By("one worker Ready: the launcher is not told")
		setStatus(workers[0], readyStatus)
		Consistently(mark, framework.ShortWindow, framework.Interval).Should(BeEmpty())

		By("both workers Ready: the waiting launcher is told")
		setStatus(workers[1], readyStatus)
		Eventually(mark, framework.Timeout, framework.Interval).Should(Not(BeEmpty()))
		Expect(time.Parse(time.RFC3339, mark(Default))).To(BeTemporally("~", time.Now(), time.Minute))

		By("a launcher of the run whose waiting container has ended is left alone")
		done := podOf(mpi.LauncherJob, "ready-launcher-0-0-y")
		setStatus(done, waitIs(corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}))
		Consistently(func(g Gomega) map[string]string {
			var got corev1.Pod
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(done), &got)).To(Succeed())
			return got.Annotations
		}, framework.ShortWindow, framework.Interval).ShouldNot(HaveKey(api.AnnotationWorkersReady))
	})

	It("hands a TrainJob whose runtime is not MPI to upstream Trainer's framework, and admits it by upstream's rules", func() {
		rt := wrappers.MakeMPIRuntime("torch-"+ns.Name, trainer.MPIImplementationOpenMPI).NotMPI().Obj()
		Expect(fw.Client.Create(ctx, rt)).To(Succeed())
		DeferCleanup(func() { Expect(fw.Client.Delete(ctx, rt)).To(Succeed()) })
		tj := wrappers.MakeTrainJob("torch", ns.Name).RuntimeRef(rt.Name).Obj()
		// Upstream's webhooks read the runtime from the operator's cache
		// alone, and refuse every job on it as on a missing runtime until
		// the cache has it: until they admit the valid job, in a dry run.
		framework.AwaitAdmitted(ctx, fw.Client, tj)

		// Upstream's torch plugin reserves the PET_ variables torchrun reads.
		bad := wrappers.MakeTrainJob("torch-env", ns.Name).RuntimeRef(rt.Name).Obj()
		bad.Spec.Trainer = &trainer.Trainer{Env: []corev1.EnvVar{{Name: "PET_NNODES", Value: "3"}}}
		err := fw.Client.Create(ctx, bad)
		Expect(err).To(MatchError(ContainSubstring("spec.trainer.env: Invalid value")))
		Expect(err).To(MatchError(ContainSubstring("must not have reserved envs, invalid envs configured: [PET_NNODES]")))

		// Whoever runs it, no job reads another job's SSH keys.
		for name, runtime := range map[string]string{"torch-thief": rt.Name, "mpi-thief": "torus-openmpi"} {
			thief := wrappers.MakeTrainJob(name, ns.Name).RuntimeRef(runtime).Obj()
			thief.Spec.Trainer = &trainer.Trainer{Env: []corev1.EnvVar{{Name: "KEY", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "victim-mpi-ssh"}, Key: "ssh-privatekey"}}}}}
			err := fw.Client.Create(ctx, thief)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
			Expect(err).To(MatchError(ContainSubstring(`Secret "victim-mpi-ssh" holds an MPI job's SSH keys`)))
		}

		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		var js jobsetv1alpha2.JobSet
		Eventually(func() error {
			return fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "torch"}, &js)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(metav1.IsControlledBy(&js, tj)).To(BeTrue())
		Expect(js.Labels).NotTo(HaveKey(api.LabelJobName), "built by upstream's plugins, not Torus's")
		Expect(js.ManagedFields).To(ContainElement(HaveField("Manager", "trainer")))
		// Upstream's own state: the runtime as the job started with it.
		var snapshot corev1.ConfigMap
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "torch-runtime-snapshot"}, &snapshot)).To(Succeed())
		Expect(snapshot.Data).To(HaveKey("runtime"))
		// None of Torus's conditions or children.
		Consistently(func(g Gomega) {
			var got trainer.TrainJob
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &got)).To(Succeed())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, trainjob.ConditionCreated)).To(BeNil())
			g.Expect(apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: mpi.SSHSecretName("torch")}, &corev1.Secret{}))).To(BeTrue())
		}, framework.ShortWindow, framework.Interval).Should(Succeed())
	})

	It("wires the trainer pods of a job that is not MPI to the status server as upstream's plugin would, and none while no server is known", func() {
		rt := wrappers.MakeMPIRuntime("torch-status-"+ns.Name, trainer.MPIImplementationOpenMPI).NotMPI().Obj()
		Expect(fw.Client.Create(ctx, rt)).To(Succeed())
		DeferCleanup(func() { Expect(fw.Client.Delete(ctx, rt)).To(Succeed()) })
		trainerPod := func(name string) *corev1.PodTemplateSpec {
			GinkgoHelper()
			var js jobsetv1alpha2.JobSet
			Eventually(func() error {
				return fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, &js)
			}, framework.Timeout, framework.Interval).Should(Succeed())
			for i := range js.Spec.ReplicatedJobs {
				if js.Spec.ReplicatedJobs[i].Name == "node" {
					return &js.Spec.ReplicatedJobs[i].Template.Spec.Template
				}
			}
			Fail("JobSet " + name + " has no trainer step (node)")
			return nil
		}

		By("no server known: the pods are left as upstream built them")
		unwired := wrappers.MakeTrainJob("unreported", ns.Name).RuntimeRef(rt.Name).Obj()
		framework.AwaitAdmitted(ctx, fw.Client, unwired)
		Expect(fw.Client.Create(ctx, unwired)).To(Succeed())
		pod := trainerPod("unreported")
		Expect(pod.Spec.Volumes).NotTo(ContainElement(HaveField("Name", trainerstatus.Volume)))
		Expect(pod.Spec.Containers[0].Env).NotTo(ContainElement(HaveField("Name", trainerstatus.EnvServerURL)))

		By("a server known: the variables, the token for the job's audience and the CA, as an MPI job's pods get them")
		statusServer.Store(&trainerstatus.Server{URL: "https://status.torus-system.svc:443", CA: "the CA"})
		DeferCleanup(func() { statusServer.Store(nil) })
		tj := wrappers.MakeTrainJob("reports", ns.Name).RuntimeRef(rt.Name).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		pod = trainerPod("reports")
		Expect(pod.Annotations).To(HaveKeyWithValue(trainerstatus.AnnotationCA, "the CA"))
		Expect(pod.Spec.Containers[0].Env).To(ContainElements(
			corev1.EnvVar{Name: trainerstatus.EnvServerURL, Value: "https://status.torus-system.svc:443" + trainerstatus.Path(ns.Name, "reports")},
			corev1.EnvVar{Name: trainerstatus.EnvToken, Value: "/var/run/secrets/kubeflow/trainer/token"},
			corev1.EnvVar{Name: trainerstatus.EnvCACert, Value: "/var/run/secrets/kubeflow/trainer/ca.crt"}))
		Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: trainerstatus.Volume, MountPath: trainerstatus.MountPath, ReadOnly: true}))
		var found bool
		for _, v := range pod.Spec.Volumes {
			if v.Name == trainerstatus.Volume {
				found = true
				Expect(v.Projected.Sources[0].ServiceAccountToken.Audience).To(Equal(trainerstatus.Audience(ns.Name, "reports")))
				Expect(v.Projected.Sources[1].DownwardAPI.Items[0].FieldRef.FieldPath).To(Equal("metadata.annotations['" + trainerstatus.AnnotationCA + "']"))
			}
		}
		Expect(found).To(BeTrue(), "no volume %s", trainerstatus.Volume)
	})

	It("uses a namespaced TrainingRuntime", func() {
		rt := wrappers.MakeMPIRuntime("team-mpi", trainer.MPIImplementationMPICH).Namespaced(ns.Name)
		Expect(fw.Client.Create(ctx, rt)).To(Succeed())
		tj := wrappers.MakeTrainJob("local", ns.Name).NamespacedRuntimeRef("team-mpi").NumNodes(3).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "local-mpi-ssh"}, &s)).To(Succeed())
			g.Expect(strings.Count(string(s.Data["hostfile"]), "\n")).To(Equal(3))
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("fails the job when activeDeadlineSeconds runs out, after a warning", func() {
		// The warning needs a reconcile in the deadline's last fifth,
		// counted from the creation timestamp's whole second: at 3 s, a
		// 0.6 s window that could close 2 s after the create, which a
		// loaded machine's reconciles miss.
		tj := wrappers.MakeTrainJob("slow", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).ActiveDeadlineSeconds(10).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		Eventually(condition(tj, trainer.TrainJobFailed), 10*framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", "DeadlineExceeded"),
			HaveField("Message", ContainSubstring("raise spec.activeDeadlineSeconds")),
		))
		Eventually(func() bool {
			return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}))
		}, framework.Timeout, framework.Interval).Should(BeTrue(), "the JobSet, and so its pods, are removed")
		Eventually(eventReasons(tj), framework.Timeout, framework.Interval).Should(ContainElements("DeadlineApproaching", "DeadlineExceeded"))

		By("counting it in the metrics: by reason, its duration, and as Failed while it exists")
		Expect(framework.MetricValue("torus_trainjobs_failed_total", map[string]string{"namespace": ns.Name, "reason": "DeadlineExceeded"})).To(BeEquivalentTo(1))
		Expect(framework.MetricValue("torus_trainjob_duration_seconds", map[string]string{"namespace": ns.Name, "result": "Failed"})).To(BeEquivalentTo(1))
		Eventually(func() float64 {
			return framework.MetricValue("torus_trainjobs", map[string]string{"namespace": ns.Name, "state": trainjob.PhaseFailed})
		}, framework.Timeout, framework.Interval).Should(BeEquivalentTo(1))
	})

	It("does not count the time a job waits in Kueue's queue against activeDeadlineSeconds", func() {
		tj := wrappers.MakeTrainJob("queued", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).ActiveDeadlineSeconds(3).Obj()
		tj.Labels = map[string]string{mpi.KueueQueueLabel: "team"}
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		var js jobsetv1alpha2.JobSet
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js)).To(Succeed())
		Expect(ptr.Deref(js.Spec.Suspend, false)).To(BeTrue(), "the JobSet waits suspended for Kueue")
		failedNow := func(g Gomega) *metav1.Condition {
			var got trainer.TrainJob
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &got)).To(Succeed())
			return meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobFailed)
		}
		Consistently(failedNow, 2*time.Duration(tj.Spec.ActiveDeadlineSeconds)*time.Second, framework.Interval).Should(BeNil(),
			"a job still queued has not started")

		By("Kueue admitting the JobSet's workload: the clock starts then")
		admitted := time.Now().Truncate(time.Second)
		wl := workloadOf(&js, 1)
		Expect(fw.Client.Create(ctx, wl)).To(Succeed())
		wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", Message: "admitted", LastTransitionTime: metav1.Now()}}
		Expect(fw.Client.Status().Update(ctx, wl)).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionAdmitted), framework.Timeout, framework.Interval).Should(HaveField("Status", metav1.ConditionTrue))
		var failed *metav1.Condition
		Eventually(func(g Gomega) {
			failed = failedNow(g)
			g.Expect(failed).NotTo(BeNil())
		}, 10*framework.Timeout, framework.Interval).Should(Succeed())
		Expect(failed.Reason).To(Equal("DeadlineExceeded"))
		started := regexp.MustCompile(`since it last started \(([^)]+)\)`).FindStringSubmatch(failed.Message)
		Expect(started).To(HaveLen(2), failed.Message)
		start, err := time.Parse(time.RFC3339, started[1])
		Expect(err).NotTo(HaveOccurred())
		Expect(start).NotTo(BeTemporally("<", admitted), "the deadline counts from the admission, not the creation")
	})

	It("leaves a JobSet that Kueue suspended for Kueue to resume, though the TrainJob names no queue", func() {
		// Kueue suspends the JobSets it manages until it admits them: with
		// a default LocalQueue or manageJobsWithoutQueueName, also those of
		// TrainJobs without a queue label. Resuming one would bypass quota.
		tj := wrappers.MakeTrainJob("kueue-held", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		var js jobsetv1alpha2.JobSet
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js)).To(Succeed())
		Expect(ptr.Deref(js.Spec.Suspend, false)).To(BeFalse())
		By("Kueue suspending the JobSet")
		patch := client.MergeFrom(js.DeepCopy())
		js.Spec.Suspend = ptr.To(true)
		js.Labels[mpi.KueueQueueLabel] = "default"
		Expect(fw.Client.Patch(ctx, &js, patch)).To(Succeed())
		By("anything bringing the TrainJob back to the controller")
		Eventually(func() error {
			var got trainer.TrainJob
			if err := fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &got); err != nil {
				return err
			}
			got.Annotations = map[string]string{"example.com/touched": "yes"}
			return fw.Client.Update(ctx, &got)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Consistently(func(g Gomega) bool {
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &js)).To(Succeed())
			return ptr.Deref(js.Spec.Suspend, false)
		}, framework.ShortWindow, framework.Interval).Should(BeTrue(), "Torus resumed a JobSet Kueue holds")

		By("a suspension of the TrainJob's own is still Torus's to lift")
		own := wrappers.MakeTrainJob("own-suspend", ns.Name).RuntimeRef("torus-openmpi").NumNodes(1).Suspend(true).Obj()
		Expect(fw.Client.Create(ctx, own)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, own)
		Eventually(func(g Gomega) {
			var got trainer.TrainJob
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(own), &got)).To(Succeed())
			got.Spec.Suspend = ptr.To(false)
			g.Expect(fw.Client.Update(ctx, &got)).To(Succeed())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(func(g Gomega) bool {
			var got jobsetv1alpha2.JobSet
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(own), &got)).To(Succeed())
			return ptr.Deref(got.Spec.Suspend, false)
		}, framework.Timeout, framework.Interval).Should(BeFalse())
	})

	It("keeps a started job in its care when its runtime is deleted: deadline, status, end and keys as it started", func() {
		rt := wrappers.MakeMPIRuntime("doomed-"+ns.Name, trainer.MPIImplementationOpenMPI).Obj()
		Expect(fw.Client.Create(ctx, rt)).To(Succeed())
		runs := wrappers.MakeTrainJob("orphan", ns.Name).RuntimeRef(rt.Name).NumNodes(2).Obj()
		dodger := wrappers.MakeTrainJob("dodger", ns.Name).RuntimeRef(rt.Name).NumNodes(1).ActiveDeadlineSeconds(4).Obj()
		Expect(fw.Client.Create(ctx, runs)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, runs)
		Eventually(func(g Gomega) { getSecret(g, runs) }, framework.Timeout, framework.Interval).Should(Succeed())
		// Its deadline may pass before or after the runtime goes: either
		// way it must be enforced.
		Expect(fw.Client.Create(ctx, dodger)).To(Succeed())

		By("deleting the runtime both jobs run on")
		Expect(fw.Client.Delete(ctx, rt)).To(Succeed())
		By("an annotation that would change the job is refused while its runtime is gone")
		Eventually(func(g Gomega) {
			var got trainer.TrainJob
			g.Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(runs), &got)).To(Succeed())
			got.Annotations = map[string]string{api.AnnotationSSHPort: "x"}
			err := fw.Client.Update(ctx, &got)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		}, framework.Timeout, framework.Interval).Should(Succeed())

		By("the job still ends as its JobSet does, and its keys go")
		setJobSetCondition(runs, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")
		Eventually(condition(runs, trainer.TrainJobComplete), framework.Timeout, framework.Interval).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(func() bool {
			return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: mpi.SSHSecretName(runs.Name)}, &corev1.Secret{}))
		}, framework.Timeout, framework.Interval).Should(BeTrue(), "the finished job's keys are deleted")
		Expect(meta.IsStatusConditionFalse(getTrainJob(runs).Status.Conditions, trainjob.ConditionCreated)).To(BeFalse(), "a started job is not reported uncreated")

		By("deleting the runtime does not dodge the deadline")
		Eventually(condition(dodger, trainer.TrainJobFailed), 10*framework.Timeout, framework.Interval).Should(HaveField("Reason", "DeadlineExceeded"))
	})

	It("fails a job whose ranks do not all run within its scheduling timeout, saying what it waited for, and frees what it held", func() {
		// Set once the job waits on its workers, so that the spec does not
		// race the timer.
		tj := wrappers.MakeTrainJob("stuck", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(HaveField("Reason", "Pending"))
		Eventually(func() error {
			got := getTrainJob(tj)
			got.Annotations = map[string]string{api.AnnotationSchedulingTimeout: "1s"}
			return fw.Client.Update(ctx, got)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(condition(tj, trainer.TrainJobFailed), framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", "SchedulingTimeout"),
			HaveField("Message", ContainSubstring("Not all ranks ran within the scheduling timeout of 1s")),
			HaveField("Message", ContainSubstring("it waited for: 0/2 workers ready")),
		))
		Eventually(func() bool {
			return apierrors.IsNotFound(fw.Client.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}))
		}, framework.Timeout, framework.Interval).Should(BeTrue(), "the JobSet, and what it held, are released")
		Eventually(eventReasons(tj), framework.Timeout, framework.Interval).Should(ContainElement("SchedulingTimeout"))

		bad := wrappers.MakeTrainJob("bad-timeout", ns.Name).RuntimeRef("torus-openmpi").Annotation(api.AnnotationSchedulingTimeout, "soon").Obj()
		Expect(fw.Client.Create(ctx, bad)).To(MatchError(ContainSubstring(`torus-mpi.io/scheduling-timeout="soon": set it to a positive duration such as 10m or 90s`)))
	})

	It("says why pods cannot be created, in the words of the quota that refused them", func() {
		tj := wrappers.MakeTrainJob("squeezed", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(HaveField("Status", metav1.ConditionFalse))

		// What the Job controller (which envtest does not run) records
		// when the API server refuses a worker pod.
		refusal := `pods "squeezed-node-0-1-abcde" is forbidden: exceeded quota: team, requested: pods=1, used: pods=3, limited: pods=3`
		now := metav1.Now()
		Expect(fw.Client.Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "squeezed-node-0.", Namespace: ns.Name},
			InvolvedObject: corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: ns.Name, Name: "squeezed-node-0"},
			Reason:         "FailedCreate", Message: "Error creating: " + refusal, Type: corev1.EventTypeWarning,
			Source: corev1.EventSource{Component: "job-controller"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		})).To(Succeed())
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", ContainSubstring("workers QuotaExceeded: the Job controller cannot create the pods of Job squeezed-node-0: Error creating: "+refusal)),
			HaveField("Message", ContainSubstring("ResourceQuota is used up")),
		))
	})

	It("shows in the State column what holds: not Running while its workers wait", func() {
		tj := wrappers.MakeTrainJob("waiting", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(HaveField("Status", metav1.ConditionFalse))
		// As kubectl get and OpenShift's console ask for it: the API
		// server's table, from the CRD's printer columns.
		cs, err := kubernetes.NewForConfig(fw.Config)
		Expect(err).NotTo(HaveOccurred())
		raw, err := cs.RESTClient().Get().AbsPath("/apis/trainer.kubeflow.org/v1alpha1/namespaces", ns.Name, "trainjobs", tj.Name).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		var table metav1.Table
		Expect(json.Unmarshal(raw, &table)).To(Succeed())
		state := -1
		for i, c := range table.ColumnDefinitions {
			if c.Name == "State" {
				state = i
			}
		}
		Expect(state).NotTo(Equal(-1), "the CRD has a State column")
		Expect(table.Rows).To(HaveLen(1))
		Expect(table.Rows[0].Cells[state]).To(Equal("Created"), "the job is created, its workers not ready: it is not Running")
	})

	It("sends no write when a reconcile has nothing to change", func() {
		tj := wrappers.MakeTrainJob("steady", ns.Name).RuntimeRef("torus-openmpi").NumNodes(2).Obj()
		Expect(fw.Client.Create(ctx, tj)).To(Succeed())
		framework.ObserveJobSet(ctx, fw.Client, tj)
		Eventually(condition(tj, trainjob.ConditionRunning), framework.Timeout, framework.Interval).Should(HaveField("Reason", "Pending"))
		// This job's writes only: other specs' jobs may still be at work
		// (a ChildConflict is rechecked every few seconds).
		ours := func(since int) []string {
			var out []string
			for _, w := range fw.Writes.Since(since) {
				if strings.Contains(w, "/namespaces/"+ns.Name+"/") {
					out = append(out, w)
				}
			}
			return out
		}
		// Let the job settle: no writes of its own over a quiet window.
		var before int
		Eventually(func() bool {
			n := fw.Writes.Count()
			settled := len(ours(before)) == 0
			before = n
			return settled
		}, framework.Timeout, framework.ShortWindow).Should(BeTrue())

		reconciles := framework.ReconcileCount("trainjob")
		Expect(fw.Client.Patch(ctx, tj, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"example.com/touched":"yes"}}}`)))).To(Succeed())
		Eventually(func() float64 { return framework.ReconcileCount("trainjob") }, framework.Timeout, framework.Interval).
			Should(BeNumerically(">", reconciles), "the change must trigger a reconcile")
		Consistently(func() []string { return ours(before) }, framework.ShortWindow, framework.Interval).Should(BeEmpty())
	})
})

// restartTwiceNotForTheProgram plays the JobSet controller restarting the
// job twice, neither time for the program (RestartsCountTowardsMax stays
// 0), waiting until the record holds each restart; it returns when the
// new run's back-off ends, counted from the second, and how long it is.
func restartTwiceNotForTheProgram(tj *trainer.TrainJob) (notBefore time.Time, wait time.Duration) {
	GinkgoHelper()
	By("the JobSet controller restarting the job twice, neither time for the program (RestartsCountTowardsMax stays 0)")
	for _, restarts := range []int32{1, 2} {
		Eventually(func(g Gomega) {
			js := getJobSet(tj)(g)
			js.Status.Restarts = restarts
			g.Expect(fw.Client.Status().Update(ctx, js)).To(Succeed())
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(func(g Gomega) int32 {
			return trainjob.RestartsOf(getTrainJob(tj)).Recorded()
		}, framework.Timeout, framework.Interval).Should(Equal(restarts))
	}
	rec := trainjob.RestartsOf(getTrainJob(tj))
	wait, streak := rec.Backoff()
	Expect(streak).To(Equal(2))
	Expect(wait).To(Equal(trainjob.RestartBackoffBase))
	return rec.Latest[1].At.Add(wait), wait
}

// workloadOf is the Workload Kueue makes for a JobSet it queues in
// LocalQueue "team": its controller is the JobSet, by UID. No Kueue runs
// here; the specs write its status as Kueue would.
func workloadOf(js *jobsetv1alpha2.JobSet, workers int32) *kueue.Workload {
	return &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-" + js.Name, Namespace: js.Namespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet", Name: js.Name, UID: js.UID, Controller: ptr.To(true),
		}}},
		Spec: kueue.WorkloadSpec{QueueName: "team", PodSets: []kueue.PodSet{{Name: "node", Count: workers, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "mpi"}}},
		}}}},
	}
}
