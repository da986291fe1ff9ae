package children_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

func replicatedJob(t *testing.T, js *jobsetv1alpha2.JobSet, name string) *jobsetv1alpha2.ReplicatedJob {
	t.Helper()
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == name {
			return &js.Spec.ReplicatedJobs[i]
		}
	}
	t.Fatalf("JobSet has no replicated job %q", name)
	return nil
}

func build(t *testing.T, tj *trainer.TrainJob, rt *wrappers.RuntimeWrapper) (*jobsetv1alpha2.JobSet, *mpi.Job) {
	t.Helper()
	job, err := mpi.ResolveJob(tj, rt.Runtime())
	if err != nil {
		t.Fatalf("ResolveJob: %v", err)
	}
	js, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{})
	if err != nil {
		t.Fatalf("BuildJobSet: %v", err)
	}
	return js, job
}

func TestBuildJobSet(t *testing.T) {
	res := corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("16Gi"), "nvidia.com/gpu": resource.MustParse("4"),
	}}
	tj := wrappers.MakeTrainJob("pi", "team-a").RuntimeRef("torus-openmpi").UID("u1").
		NumNodes(3).Image("mpi-pi:v2").Command("mpirun", "-n", "12", "pi").Env("NCCL_DEBUG", "INFO").Resources(res).Obj()
	js, job := build(t, tj, wrappers.MakeMPIRuntime("torus-openmpi", trainer.MPIImplementationOpenMPI))

	if job.SlotsPerHost != 4 {
		t.Errorf("slots = %d, want one per GPU (4)", job.SlotsPerHost)
	}
	if got := []string{js.Spec.ReplicatedJobs[0].Name, js.Spec.ReplicatedJobs[1].Name}; !cmp.Equal(got, []string{"node", "launcher"}) {
		t.Errorf("replicated jobs in order %v; JobSet needs the node job before the launcher that depends on it", got)
	}
	launcher, node := replicatedJob(t, js, mpi.LauncherJob), replicatedJob(t, js, mpi.NodeJob)
	if diff := cmp.Diff([]int32{1, 1, 3, 3}, []int32{*launcher.Template.Spec.Parallelism, *launcher.Template.Spec.Completions,
		*node.Template.Spec.Parallelism, *node.Template.Spec.Completions}); diff != "" {
		t.Errorf("launcher and node sizes (-want,+got):\n%s", diff)
	}
	if got := ptr.Deref(node.Template.Spec.CompletionMode, ""); got != batchv1.IndexedCompletion {
		t.Errorf("node completion mode = %q, want Indexed for stable host names", got)
	}
	if diff := cmp.Diff([]jobsetv1alpha2.DependsOn{{Name: mpi.NodeJob, Status: jobsetv1alpha2.DependencyReady}}, launcher.DependsOn); diff != "" {
		t.Errorf("launcher dependsOn (-want,+got):\n%s", diff)
	}

	lc := launcher.Template.Spec.Template.Spec.Containers[0]
	wc := node.Template.Spec.Template.Spec.Containers[0]
	if lc.Image != "mpi-pi:v2" || wc.Image != "mpi-pi:v2" {
		t.Errorf("images = %q, %q; want the TrainJob's on both", lc.Image, wc.Image)
	}
	if diff := cmp.Diff([]string{"mpirun", "-n", "12", "pi"}, lc.Command); diff != "" {
		t.Errorf("launcher command (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/usr/sbin/sshd"}, wc.Command); diff != "" {
		t.Errorf("workers keep the runtime's sshd command (-want,+got):\n%s", diff)
	}
	wantLauncherEnv := []corev1.EnvVar{
		{Name: "NCCL_DEBUG", Value: "INFO"},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
		{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
		{Name: "OMPI_MCA_orte_set_default_slots", Value: "4"},
		{Name: "OMPI_MCA_plm_rsh_args", Value: "-F /home/mpiuser/.ssh/config"},
		// Ranks start through sshd, which drops the worker container's
		// environment: mpirun forwards the job's own variables.
		{Name: "OMPI_MCA_mca_base_env_list", Value: "NCCL_DEBUG"},
		// A default the job's environment may override.
		{Name: "OMPI_MCA_btl_vader_single_copy_mechanism", Value: "none"},
	}
	if diff := cmp.Diff(wantLauncherEnv, lc.Env); diff != "" {
		t.Errorf("launcher env (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}}, wc.Env); diff != "" {
		t.Errorf("worker env (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(res, wc.Resources); diff != "" {
		t.Errorf("worker resources (-want,+got):\n%s", diff)
	}
	if len(lc.Resources.Limits) != 0 {
		t.Errorf("launcher got node resources %v though it runs no ranks", lc.Resources.Limits)
	}

	wantMounts := []corev1.VolumeMount{
		{Name: mpi.HostfileVolume, MountPath: "/etc/mpi", ReadOnly: true},
		{Name: mpi.SSHVolume, MountPath: "/home/mpiuser/.ssh", SubPath: mpi.SSHDirSubPath},
		{Name: mpi.SSHVolume, MountPath: "/etc/passwd", SubPath: mpi.PasswdSubPath, ReadOnly: true},
	}
	if diff := cmp.Diff(wantMounts, lc.VolumeMounts); diff != "" {
		t.Errorf("launcher mounts (-want,+got):\n%s", diff)
	}
	init := node.Template.Spec.Template.Spec.InitContainers[0]
	if init.Name != mpi.SSHInitContainer || init.Image != "mpi-pi:v2" || ptr.Deref(init.SecurityContext.RunAsUser, 0) != 1000 {
		t.Errorf("SSH init container = %s image %s user %v; want %s from the job's image as uid 1000",
			init.Name, init.Image, init.SecurityContext.RunAsUser, mpi.SSHInitContainer)
	}
	if js.Spec.Network == nil || !ptr.Deref(js.Spec.Network.EnableDNSHostnames, false) || js.Spec.Network.Subdomain != "pi" {
		t.Errorf("network = %+v, want DNS host names under subdomain pi", js.Spec.Network)
	}
	if diff := cmp.Diff(&jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll, TargetReplicatedJobs: []string{mpi.LauncherJob}}, js.Spec.SuccessPolicy); diff != "" {
		t.Errorf("success policy (-want,+got):\n%s", diff)
	}
	if got := js.OwnerReferences[0]; got.Kind != "TrainJob" || got.Name != "pi" || !ptr.Deref(got.Controller, false) {
		t.Errorf("owner = %+v, want the TrainJob as controller", got)
	}
	if node.Template.Spec.Template.Spec.DNSConfig != nil {
		t.Error("Open MPI pods got a DNS search entry they do not need")
	}
}

func TestBuildJobSetPerImplementation(t *testing.T) {
	cases := map[string]struct {
		impl        trainer.MPIImplementation
		annotation  string
		wantEnv     []string
		wantSearch  bool
		wantHostfmt string
	}{
		"Open MPI 4": {impl: "OpenMPI", wantEnv: []string{"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_btl_vader_single_copy_mechanism"}, wantHostfmt: "pi-node-0-0.pi slots=2\n"},
		"Open MPI 5": {impl: "OpenMPI", annotation: "5", wantEnv: []string{"PRTE_MCA_prte_default_hostfile", "PRTE_MCA_prte_keep_fqdn_hostnames", "PRTE_MCA_plm_ssh_args"}, wantHostfmt: "pi-node-0-0.pi slots=2\n"},
		"Intel MPI":  {impl: "Intel", wantEnv: []string{"I_MPI_HYDRA_HOST_FILE", "I_MPI_HYDRA_BOOTSTRAP", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "I_MPI_PERHOST"}, wantSearch: true, wantHostfmt: "pi-node-0-0.pi:2\n"},
		"MPICH":      {impl: "MPICH", wantEnv: []string{"HYDRA_HOST_FILE", "HYDRA_LAUNCHER", "HYDRA_LAUNCHER_EXTRA_ARGS"}, wantSearch: true, wantHostfmt: "pi-node-0-0.pi:2\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := wrappers.MakeMPIRuntime("rt", tc.impl)
			if tc.annotation != "" {
				rt.Annotation(api.AnnotationOpenMPIVersion, tc.annotation)
			}
			tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(1).NumProcPerNode(2).Obj()
			js, job := build(t, tj, rt)
			var got []string
			for _, e := range replicatedJob(t, js, mpi.LauncherJob).Template.Spec.Template.Spec.Containers[0].Env {
				got = append(got, e.Name)
			}
			if diff := cmp.Diff(tc.wantEnv, got); diff != "" {
				t.Errorf("launcher env names (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantHostfmt, job.Hostfile()); diff != "" {
				t.Errorf("hostfile (-want,+got):\n%s", diff)
			}
			for _, rjName := range []string{mpi.LauncherJob, mpi.NodeJob} {
				dns := replicatedJob(t, js, rjName).Template.Spec.Template.Spec.DNSConfig
				if tc.wantSearch {
					if dns == nil || !cmp.Equal([]string{"pi.ns.svc.cluster.local"}, dns.Searches) {
						t.Errorf("%s DNS config = %+v, want search pi.ns.svc.cluster.local", rjName, dns)
					}
				} else if dns != nil {
					t.Errorf("%s DNS config = %+v, want none", rjName, dns)
				}
			}
			// Hydra's proxies connect back to mpiexec by the launcher's
			// name: its init container waits for that name to resolve.
			script := replicatedJob(t, js, mpi.LauncherJob).Template.Spec.Template.Spec.InitContainers[0].Command[2]
			if got := strings.Contains(script, `echo "pi-launcher-0-0.pi"`); got != tc.wantSearch {
				t.Errorf("the launcher waits for its own name to resolve: %v, want %v:\n%s", got, tc.wantSearch, script)
			}
		})
	}
}

// MPI pods keep a service mesh's sidecar out, unless the runtime decides.
func TestBuildJobSetNoMeshSidecar(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", "OpenMPI")
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]; rj.Name == mpi.LauncherJob {
			rj.Template.Spec.Template.Labels = map[string]string{children.IstioInject: "true"}
		}
	}
	js, _ := build(t, wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2).Obj(), rt)
	want := map[string]string{mpi.LauncherJob: "true", mpi.NodeJob: "false"}
	got := map[string]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		got[rj.Name] = rj.Template.Spec.Template.Labels[children.IstioInject]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s per replicated job (-want,+got):\n%s", children.IstioInject, diff)
	}
}

// Every container Torus runs or configures keeps the end of its output in
// its status when it fails, unless the runtime chose a policy itself.
func TestBuildJobSetTerminationMessages(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", "MPICH")
	spec := &rt.Spec.Template.Spec
	for i := range spec.ReplicatedJobs {
		if rj := &spec.ReplicatedJobs[i]; rj.Name == mpi.NodeJob {
			rj.Template.Spec.Template.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}
	}
	tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2).Obj()
	js, _ := build(t, tj, rt)
	want := map[string]corev1.TerminationMessagePolicy{
		mpi.LauncherJob + "/" + mpi.SSHInitContainer: corev1.TerminationMessageFallbackToLogsOnError,
		mpi.LauncherJob + "/" + mpi.TrainerContainer: corev1.TerminationMessageFallbackToLogsOnError,
		mpi.NodeJob + "/" + mpi.SSHInitContainer:     corev1.TerminationMessageFallbackToLogsOnError,
		mpi.NodeJob + "/" + mpi.TrainerContainer:     corev1.TerminationMessageReadFile,
	}
	got := map[string]corev1.TerminationMessagePolicy{}
	for _, rj := range js.Spec.ReplicatedJobs {
		ps := rj.Template.Spec.Template.Spec
		for _, c := range append(ps.InitContainers, ps.Containers...) {
			got[rj.Name+"/"+c.Name] = c.TerminationMessagePolicy
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("termination message policies (-want,+got):\n%s", diff)
	}
}

func TestBuildJobSetLauncherAsNode(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", "OpenMPI").LauncherRunsRanks(true)
	res := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(4).Resources(res).Obj()
	js, job := build(t, tj, rt)
	if got := *replicatedJob(t, js, mpi.NodeJob).Template.Spec.Parallelism; got != 3 {
		t.Errorf("workers = %d, want 3 beside the launcher", got)
	}
	if diff := cmp.Diff("pi-launcher-0-0.pi slots=1\npi-node-0-0.pi slots=1\npi-node-0-1.pi slots=1\npi-node-0-2.pi slots=1\n", job.Hostfile()); diff != "" {
		t.Errorf("hostfile (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(res, replicatedJob(t, js, mpi.LauncherJob).Template.Spec.Template.Spec.Containers[0].Resources); diff != "" {
		t.Errorf("a launcher that runs ranks gets node resources (-want,+got):\n%s", diff)
	}
}

func TestBuildJobSetQueueAndTopology(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", "MPICH").Annotation(api.AnnotationTopology, "cloud.provider.com/topology-rack")
	tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(4).Obj()
	tj.Labels = map[string]string{mpi.KueueQueueLabel: "team", mpi.KueuePriorityLabel: "high"}
	job, err := mpi.ResolveJob(tj, rt.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	js, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{KueueJobSets: true})
	if err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(js.Spec.Suspend, false) || js.Labels[mpi.KueueQueueLabel] != "team" || js.Labels[mpi.KueuePriorityLabel] != "high" {
		t.Errorf("queued JobSet: suspend %v, labels %v; want suspended with queue and priority labels", js.Spec.Suspend, js.Labels)
	}
	want := map[string]string{mpi.KueueRequiredTopology: "cloud.provider.com/topology-rack", mpi.KueuePodSetGroup: "mpi"}
	for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
		if diff := cmp.Diff(want, replicatedJob(t, js, name).Template.Spec.Template.Annotations); diff != "" {
			t.Errorf("%s pod annotations: both pod sets in one topology domain (-want,+got):\n%s", name, diff)
		}
	}
	gate := []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}}
	for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
		if diff := cmp.Diff(gate, replicatedJob(t, js, name).Template.Spec.Template.Spec.SchedulingGates); diff != "" {
			t.Errorf("%s pods: Kueue resumes the JobSet, so its pods wait for Torus's keys (-want,+got):\n%s", name, diff)
		}
	}
	if got := ptr.Deref(replicatedJob(t, js, mpi.NodeJob).Template.Spec.BackoffLimit, -1); got != 0 {
		t.Errorf("node backoffLimit = %d, want 0: a failed worker fails the job", got)
	}
	unqueued, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := unqueued.Labels[mpi.KueueQueueLabel]; ok || ptr.Deref(unqueued.Spec.Suspend, false) {
		t.Error("with Kueue's TrainJob integration the JobSet carries no queue and follows spec.suspend")
	}
	if gates := replicatedJob(t, unqueued, mpi.NodeJob).Template.Spec.Template.Spec.SchedulingGates; len(gates) != 0 {
		t.Errorf("Torus resumes the JobSet after making the keys, so its pods need no gate: %v", gates)
	}
}

func TestBuildJobSetRejectsIncompleteRuntime(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", "OpenMPI").WithoutReplicatedJob(mpi.NodeJob)
	tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").Obj()
	job, err := mpi.ResolveJob(tj, rt.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{}); err == nil {
		t.Error("BuildJobSet accepted a runtime without a node job")
	}
}

var sizes = []int32{1, 64, 1024, 4096}

func BenchmarkBuildJobSet(b *testing.B) {
	rt := wrappers.MakeMPIRuntime("rt", "OpenMPI")
	for _, n := range sizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(n).Obj()
			job, err := mpi.ResolveJob(tj, rt.Runtime())
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkHostfile(b *testing.B) {
	for _, impl := range []mpi.Implementation{mpi.OpenMPI, mpi.IntelMPI} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/workers=%d", impl, n), func(b *testing.B) {
				p := mpi.NewPlacement("a-typical-job-name", n, 8, false)
				for b.Loop() {
					_ = mpi.Hostfile(impl, p)
				}
			})
		}
	}
}

// A job's runtime patches reach its pods beside what Torus sets: the SSH
// init container runs as the user a patch gives the MPI container, so the
// keys it copies are that user's.
func TestBuildJobSetRuntimePatches(t *testing.T) {
	data := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets"}}}
	mount := corev1.VolumeMount{Name: "data", MountPath: "/data"}
	tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2).PodPatch("torus-mpi.io/kubectl-mpi", trainer.PodSpecPatch{
		Volumes: []corev1.Volume{data},
		Containers: []trainer.ContainerPatch{{Name: mpi.TrainerContainer, VolumeMounts: []corev1.VolumeMount{mount},
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}}},
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
		ServiceAccountName: ptr.To("trainer"),
	}, mpi.LauncherJob, mpi.NodeJob).Obj()
	js, _ := build(t, tj, wrappers.MakeMPIRuntime("rt", "OpenMPI"))
	for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
		ps := replicatedJob(t, js, name).Template.Spec.Template.Spec
		if ps.ServiceAccountName != "trainer" || !cmp.Equal(ps.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "registry"}}) {
			t.Errorf("%s: service account %q, pull secrets %v; want the patch's", name, ps.ServiceAccountName, ps.ImagePullSecrets)
		}
		vols := map[string]bool{}
		for _, v := range ps.Volumes {
			vols[v.Name] = true
		}
		if !vols["data"] || !vols[mpi.SSHVolume] || !vols[mpi.SSHSecretVolume] {
			t.Errorf("%s: volumes %v; want the patch's beside Torus's", name, vols)
		}
		ctr := ps.Containers[0]
		mounts := map[string]string{}
		for _, m := range ctr.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		if mounts["/data"] != "data" || mounts[mpi.PasswdPath] != mpi.SSHVolume {
			t.Errorf("%s: mounts %v; want the patch's beside Torus's", name, mounts)
		}
		if got := ptr.Deref(ctr.SecurityContext.RunAsUser, 0); got != 1000 {
			t.Errorf("%s: MPI container runs as %d, want the patch's 1000", name, got)
		}
		if diff := cmp.Diff(ctr.SecurityContext, ps.InitContainers[0].SecurityContext); ps.InitContainers[0].Name != mpi.SSHInitContainer || diff != "" {
			t.Errorf("%s: %s's security context (-want,+got):\n%s", name, ps.InitContainers[0].Name, diff)
		}
	}
}

// A launcher default yields to the job's own setting: one entry, the job's.
func TestBuildJobSetLauncherDefaultsYield(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("rt", "OpenMPI")
	tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(1).NumProcPerNode(2).
		Env("OMPI_MCA_btl_vader_single_copy_mechanism", "cma").Obj()
	js, _ := build(t, tj, rt)
	var got []corev1.EnvVar
	for _, e := range replicatedJob(t, js, mpi.LauncherJob).Template.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "OMPI_MCA_btl_vader_single_copy_mechanism" {
			got = append(got, e)
		}
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "OMPI_MCA_btl_vader_single_copy_mechanism", Value: "cma"}}, got); diff != "" {
		t.Errorf("single copy setting (-want,+got):\n%s", diff)
	}
}

// TestBuildJobSetLaunchAgent: a job using Torus's launch agent runs
// nothing of OpenSSH's. Its pods' init container comes from Torus's image,
// its workers run the agent, and each implementation's launcher is given
// the agent's client in place of ssh.
func TestBuildJobSetLaunchAgent(t *testing.T) {
	const image = "registry.example/torus/torus-operator:v1"
	cases := map[string]struct {
		impl     trainer.MPIImplementation
		version  string
		agentEnv string
	}{
		"Open MPI 4": {impl: "OpenMPI", agentEnv: "OMPI_MCA_plm_rsh_agent"},
		"Open MPI 5": {impl: "OpenMPI", version: "5", agentEnv: "PRTE_MCA_plm_ssh_agent"},
		"Intel MPI":  {impl: "Intel", agentEnv: "I_MPI_HYDRA_BOOTSTRAP_EXEC"},
		"MPICH":      {impl: "MPICH", agentEnv: "HYDRA_LAUNCHER_EXEC"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := wrappers.MakeMPIRuntime("rt", tc.impl).Annotation(api.AnnotationRemoteLaunch, api.RemoteLaunchAgent)
			if tc.version != "" {
				rt.Annotation(api.AnnotationOpenMPIVersion, tc.version)
			}
			tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2).Obj()
			job, err := mpi.ResolveJob(tj, rt.Runtime())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{}); err == nil || !strings.Contains(err.Error(), "--launch-image") {
				t.Errorf("with no launch image: %v, want an error naming --launch-image", err)
			}
			js, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{LaunchImage: image})
			if err != nil {
				t.Fatal(err)
			}
			for _, role := range []string{mpi.LauncherJob, mpi.NodeJob} {
				pod := replicatedJob(t, js, role).Template.Spec.Template.Spec
				init := pod.InitContainers[0]
				if init.Image != image || init.Command[0] != mpi.LaunchImagePath || init.Args[0] != "setup" {
					t.Errorf("%s's init container runs %s %v from %s, want torus-launch setup from Torus's image", role, init.Command, init.Args, init.Image)
				}
				// The launcher waits in its own container, ahead of its
				// command (TestBuildJobSetStartOrder).
				if waits := slices.ContainsFunc(init.Args, func(a string) bool { return strings.HasPrefix(a, "--wait-hostfile=") }); waits {
					t.Errorf("%s's init container waits for the hosts: %v", role, waits)
				}
				ctr := pod.Containers[0]
				env := map[string]string{}
				for _, e := range ctr.Env {
					env[e.Name] = e.Value
				}
				if env[tc.agentEnv] != mpi.LaunchClient() || env["TORUS_SSH_PORT"] != "2222" {
					t.Errorf("%s's env %v, want %s=%s and the client's settings", role, env, tc.agentEnv, mpi.LaunchClient())
				}
				for _, m := range ctr.VolumeMounts {
					if m.MountPath == mpi.PasswdPath {
						t.Errorf("%s mounts a user database: the agent needs none", role)
					}
				}
				if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == mpi.LaunchVolume && m.ReadOnly }) {
					t.Errorf("%s does not mount the agent's binary read-only: %v", role, ctr.VolumeMounts)
				}
			}
			worker := replicatedJob(t, js, mpi.NodeJob).Template.Spec.Template.Spec.Containers[0]
			if diff := cmp.Diff(mpi.LaunchAgentCommand(job.SSH), worker.Command); diff != "" || worker.Args != nil {
				t.Errorf("the workers run %v %v, want the agent (-want,+got):\n%s", worker.Command, worker.Args, diff)
			}
		})
	}
}

// TestBuildJobSetStartOrder: with Torus's image at hand, the launcher
// starts with its workers and waits for them from that image, reading
// Torus's workers-ready mark; a runtime's own dependsOn on the workers
// goes, any other stays. Without the image, the launcher starts once the
// workers are Ready and its SSH setup waits for the hosts itself.
func TestBuildJobSetStartOrder(t *testing.T) {
	const image = "registry.example/torus/torus-operator:v1"
	initializer := jobsetv1alpha2.DependsOn{Name: "model-initializer", Status: jobsetv1alpha2.DependencyComplete}
	for name, tc := range map[string]struct {
		launch      string
		image       string
		after       bool
		runtimeDeps []jobsetv1alpha2.DependsOn
		wantDeps    []jobsetv1alpha2.DependsOn
		// wantWait is the launcher's container that waits from Torus's
		// image; "" for the SSH setup's own wait.
		wantWait string
		// entrypoint: the launcher has no command, only its image's.
		entrypoint bool
	}{
		"OpenSSH with Torus's image: the wait is a container of its own": {
			launch: api.RemoteLaunchOpenSSH, image: image, wantWait: mpi.WaitInitContainer,
		},
		"OpenSSH with Torus's image, a runtime made for upstream": {
			launch: api.RemoteLaunchOpenSSH, image: image, wantWait: mpi.WaitInitContainer,
			runtimeDeps: []jobsetv1alpha2.DependsOn{initializer, {Name: mpi.NodeJob, Status: jobsetv1alpha2.DependencyReady}},
			wantDeps:    []jobsetv1alpha2.DependsOn{initializer},
		},
		"the launch agent: the launcher's own container waits, then runs its command": {
			launch: api.RemoteLaunchAgent, image: image, wantWait: mpi.TrainerContainer,
		},
		"the launch agent, a launcher running its image's entrypoint: its setup waits": {
			launch: api.RemoteLaunchAgent, image: image, wantWait: mpi.SSHInitContainer, entrypoint: true,
		},
		"the launch agent, launchers after their workers (kwok): the wait reads no mark": {
			launch: api.RemoteLaunchAgent, image: image, after: true, wantWait: mpi.TrainerContainer,
			wantDeps: []jobsetv1alpha2.DependsOn{{Name: mpi.NodeJob, Status: jobsetv1alpha2.DependencyReady}},
		},
		"OpenSSH without Torus's image": {
			launch:   api.RemoteLaunchOpenSSH,
			wantDeps: []jobsetv1alpha2.DependsOn{{Name: mpi.NodeJob, Status: jobsetv1alpha2.DependencyReady}},
		},
		"OpenSSH with Torus's image, launchers after their workers (kwok)": {
			launch: api.RemoteLaunchOpenSSH, image: image, after: true,
			wantDeps: []jobsetv1alpha2.DependsOn{{Name: mpi.NodeJob, Status: jobsetv1alpha2.DependencyReady}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI).Annotation(api.AnnotationRemoteLaunch, tc.launch)
			r := rt.Runtime()
			for i := range r.Spec.Template.Spec.ReplicatedJobs {
				if rj := &r.Spec.Template.Spec.ReplicatedJobs[i]; rj.Name == mpi.LauncherJob {
					rj.DependsOn = tc.runtimeDeps
					if tc.entrypoint {
						rj.Template.Spec.Template.Spec.Containers[0].Command = nil
					}
				}
			}
			tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2).Obj()
			job, err := mpi.ResolveJob(tj, r)
			if err != nil {
				t.Fatal(err)
			}
			js, err := children.BuildJobSet(tj, r, job, children.BuildOptions{LaunchImage: tc.image, LauncherAfterWorkers: tc.after})
			if err != nil {
				t.Fatal(err)
			}
			launcher := replicatedJob(t, js, mpi.LauncherJob)
			if diff := cmp.Diff(tc.wantDeps, launcher.DependsOn); diff != "" {
				t.Errorf("launcher dependsOn (-want,+got):\n%s", diff)
			}
			pod := launcher.Template.Spec.Template.Spec
			var waits []string
			for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
				// The main container's wait is its command's; an init
				// container's, its arguments.
				argv := append(slices.Clone(c.Command), c.Args...)
				if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--wait-hostfile=") }) {
					waits = append(waits, c.Name)
					if c.Image != image && !strings.HasPrefix(argv[0], mpi.LaunchBinDir+"/") {
						t.Errorf("%s waits with %s from %s, want Torus's binary", c.Name, argv[0], c.Image)
					}
					if c.Name == mpi.TrainerContainer {
						// The wait, then the command as the runtime has it.
						if i := slices.Index(argv, "--"); i < 0 || argv[1] != "wait" || !slices.Equal(argv[i+1:], []string{"mpirun", "/home/mpiuser/pi"}) {
							t.Errorf("the launcher runs %v, want torus-launch wait ... -- mpirun /home/mpiuser/pi", argv)
						}
					}
					readsMark := slices.Contains(argv, "--workers-ready="+mpi.PodInfoMountPath+"/"+mpi.PodInfoWorkersReady) &&
						slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
							return m.Name == mpi.PodInfoVolume && m.MountPath == mpi.PodInfoMountPath
						})
					if readsMark == tc.after {
						t.Errorf("%s reads Torus's workers-ready mark: %t, want %t: %v %v", c.Name, readsMark, !tc.after, argv, c.VolumeMounts)
					}
					if hostKeyOnly := slices.Contains(argv, "--wait-host-key-only"); hostKeyOnly != (tc.launch == api.RemoteLaunchOpenSSH) {
						t.Errorf("%s waits for the host key alone: %t", c.Name, hostKeyOnly)
					}
				}
			}
			if tc.wantWait == "" {
				if len(waits) > 0 {
					t.Errorf("%v wait from Torus's image, which the operator does not have", waits)
				}
				script := strings.Join(pod.InitContainers[0].Command, " ")
				if !strings.Contains(script, "getent hosts") {
					t.Errorf("the SSH setup does not wait for the hosts to resolve:\n%s", script)
				}
				return
			}
			if diff := cmp.Diff([]string{tc.wantWait}, waits); diff != "" {
				t.Errorf("init containers that wait (-want,+got):\n%s", diff)
			}
			if last := pod.InitContainers[len(pod.InitContainers)-1].Name; tc.wantWait == mpi.WaitInitContainer && last != tc.wantWait {
				t.Errorf("the last init container is %s, want the wait", last)
			}
			if script := strings.Join(pod.InitContainers[0].Command, " "); strings.Contains(script, "getent") || strings.Contains(script, "sleep") {
				t.Errorf("the SSH setup waits too:\n%s", script)
			}
			if hasMark := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mpi.PodInfoVolume && v.DownwardAPI != nil }); hasMark == tc.after {
				t.Errorf("the launcher has a downward API volume for the mark: %t, want %t: %v", hasMark, !tc.after, pod.Volumes)
			}
		})
	}
}

// mountingNode mounts image volumes; olderNode does not.
var (
	mountingNode = corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "new-0", Labels: map[string]string{"pool": "new"}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.2", ContainerRuntimeVersion: "containerd://2.2.1"}},
	}
	olderNode = corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "old-0", Labels: map[string]string{"pool": "old"}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.34.1", ContainerRuntimeVersion: "containerd://1.7.27"}},
	}
)

// agentLaunchImage is Torus's image in the launch agent's tests.
const agentLaunchImage = "registry.example/torus:v1"

// agentJob is a 2-worker Open MPI job of the launch agent, resolved.
func agentJob(t *testing.T) (*trainer.TrainJob, *mpi.Runtime, *mpi.Job) {
	t.Helper()
	r := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI).Annotation(api.AnnotationRemoteLaunch, api.RemoteLaunchAgent).Runtime()
	tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2).Obj()
	job, err := mpi.ResolveJob(tj, r)
	if err != nil {
		t.Fatal(err)
	}
	return tj, r, job
}

// Where every node mounts image volumes, auto makes the JobSet that asking
// for the image volume makes.
func TestBuildJobSetAutoIsTheImageVolume(t *testing.T) {
	tj, r, job := agentJob(t)
	build := func(delivery string) *jobsetv1alpha2.JobSet {
		t.Helper()
		js, err := children.BuildJobSet(tj, r, job, children.BuildOptions{LaunchImage: agentLaunchImage, LaunchAgentDelivery: delivery,
			Nodes: func() []corev1.Node { return []corev1.Node{mountingNode} }})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	if diff := cmp.Diff(build(api.LaunchAgentByImageVolume), build(api.LaunchAgentAuto)); diff != "" {
		t.Errorf("auto differs from the image volume (-image-volume +auto):\n%s", diff)
	}
}

// A job keeps, from its record, the delivery auto settled on when its
// JobSet was made, whatever the nodes become.
func TestBuildJobSetAutoDeliveryKeptByTheRecord(t *testing.T) {
	tj, r, job := agentJob(t)
	volumes := func(js *jobsetv1alpha2.JobSet) int {
		n := 0
		for _, rj := range js.Spec.ReplicatedJobs {
			n += len(slices.DeleteFunc(slices.Clone(rj.Template.Spec.Template.Spec.Volumes), func(v corev1.Volume) bool { return v.Name != mpi.LaunchImageVolume }))
		}
		return n
	}
	for _, tc := range []struct {
		name              string
		first, afterwards []corev1.Node
		want              int
	}{
		{"the image volume, after an older node joined", []corev1.Node{mountingNode}, []corev1.Node{mountingNode, olderNode}, 2},
		{"the init container, after the older node left", []corev1.Node{mountingNode, olderNode}, []corev1.Node{mountingNode}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := children.BuildOptions{LaunchImage: agentLaunchImage, LaunchAgentDelivery: api.LaunchAgentAuto, Nodes: func() []corev1.Node { return tc.first }}
			first, err := children.BuildJobSet(tj, r, job, opts)
			if err != nil {
				t.Fatal(err)
			}
			started, ok := mpi.DecodeJob(first.Annotations[api.AnnotationJob])
			if !ok {
				t.Fatal("no job record on the JobSet")
			}
			opts.Nodes = func() []corev1.Node { return tc.afterwards }
			again, err := children.BuildJobSet(tj, r, started, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := volumes(first); got != tc.want {
				t.Fatalf("the first JobSet has %d image volumes, want %d", got, tc.want)
			}
			if diff := cmp.Diff(first.Spec, again.Spec); diff != "" {
				t.Errorf("the JobSet built from the job's record differs (-first +again):\n%s", diff)
			}
		})
	}
}

func TestBuildJobSetAgentFromImage(t *testing.T) {
	const (
		bin       = "/usr/local/bin/torus-launch"
		launchImg = "registry.example/torus/torus-operator:v1"
	)
	for name, tc := range map[string]struct {
		runtimeAnnotation, jobAnnotation bool
		jobImage                         string
		entrypoint                       bool
		// The delivery the runtime, the job and the operator choose
		// (api.AnnotationLaunchAgentDelivery).
		runtimeDelivery, jobDelivery, operatorDelivery string
		// wantInit: the roles whose pods keep the setup's init container.
		wantInit []string
		// fromVolume: the containers run the binary from Torus's image,
		// mounted as an image volume.
		fromVolume bool
		// For an auto delivery: the nodes (nil: none listed), whether
		// the cluster has SCCs, and the runtime's node selector.
		nodes        []corev1.Node
		sccs         bool
		nodeSelector map[string]string
	}{
		"the runtime's image holds the binary: no init container": {
			runtimeAnnotation: true,
		},
		"a job with its own image, the runtime's annotation: the init container brings the binary": {
			runtimeAnnotation: true, jobImage: "registry.example/mine:1",
			wantInit: []string{api.RoleLauncher, api.RoleWorker},
		},
		"a job with its own image and the annotation: no init container": {
			jobAnnotation: true, jobImage: "registry.example/mine:1",
		},
		"a launcher running its image's entrypoint keeps its setup container": {
			runtimeAnnotation: true, entrypoint: true,
			wantInit: []string{api.RoleLauncher},
		},
		"the runtime asks for Torus's image as an image volume: no init container": {
			runtimeDelivery: api.LaunchAgentByImageVolume, fromVolume: true,
		},
		"the operator's default is the image volume": {
			operatorDelivery: api.LaunchAgentByImageVolume, fromVolume: true,
		},
		"a job asking for the init container over the operator's image volume": {
			jobDelivery: api.LaunchAgentByInitContainer, operatorDelivery: api.LaunchAgentByImageVolume,
			wantInit: []string{api.RoleLauncher, api.RoleWorker},
		},
		"an image that holds the binary is not given the volume": {
			runtimeAnnotation: true, runtimeDelivery: api.LaunchAgentByImageVolume,
		},
		"a launcher running its image's entrypoint keeps its setup container beside the volume's workers": {
			runtimeDelivery: api.LaunchAgentByImageVolume, entrypoint: true, fromVolume: true,
			wantInit: []string{api.RoleLauncher},
		},
		"auto, where every node mounts image volumes: the volume": {
			operatorDelivery: api.LaunchAgentAuto, nodes: []corev1.Node{mountingNode}, fromVolume: true,
		},
		"auto, where a node the pods may run on does not: the init container": {
			operatorDelivery: api.LaunchAgentAuto, nodes: []corev1.Node{mountingNode, olderNode},
			wantInit: []string{api.RoleLauncher, api.RoleWorker},
		},
		"auto, the runtime's node selector keeping the pods on nodes that mount them: the volume": {
			operatorDelivery: api.LaunchAgentAuto, nodes: []corev1.Node{mountingNode, olderNode}, nodeSelector: mountingNode.Labels, fromVolume: true,
		},
		"auto, where OpenShift's SCCs decide the pods' volumes: the init container": {
			operatorDelivery: api.LaunchAgentAuto, nodes: []corev1.Node{mountingNode}, sccs: true,
			wantInit: []string{api.RoleLauncher, api.RoleWorker},
		},
		"auto, with no node known: the init container": {
			operatorDelivery: api.LaunchAgentAuto,
			wantInit:         []string{api.RoleLauncher, api.RoleWorker},
		},
		"a runtime asking for auto over the operator's init container": {
			runtimeDelivery: api.LaunchAgentAuto, operatorDelivery: api.LaunchAgentByInitContainer, nodes: []corev1.Node{mountingNode}, fromVolume: true,
		},
		"auto, where the image holds the binary: nothing to deliver": {
			runtimeAnnotation: true, operatorDelivery: api.LaunchAgentAuto, nodes: []corev1.Node{mountingNode},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rtw := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI).Annotation(api.AnnotationRemoteLaunch, api.RemoteLaunchAgent)
			if tc.runtimeAnnotation {
				rtw = rtw.Annotation(api.AnnotationLaunchAgentPath, bin)
			}
			if tc.runtimeDelivery != "" {
				rtw = rtw.Annotation(api.AnnotationLaunchAgentDelivery, tc.runtimeDelivery)
			}
			r := rtw.Runtime()
			if tc.nodeSelector != nil {
				for i := range r.Spec.Template.Spec.ReplicatedJobs {
					r.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.NodeSelector = tc.nodeSelector
				}
			}
			if tc.entrypoint {
				for i := range r.Spec.Template.Spec.ReplicatedJobs {
					if rj := &r.Spec.Template.Spec.ReplicatedJobs[i]; rj.Name == mpi.LauncherJob {
						rj.Template.Spec.Template.Spec.Containers[0].Command = nil
					}
				}
			}
			tjw := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2)
			if tc.jobImage != "" {
				tjw = tjw.Image(tc.jobImage)
			}
			if tc.jobAnnotation {
				tjw = tjw.Annotation(api.AnnotationLaunchAgentPath, bin)
			}
			if tc.jobDelivery != "" {
				tjw = tjw.Annotation(api.AnnotationLaunchAgentDelivery, tc.jobDelivery)
			}
			tj := tjw.Obj()
			job, err := mpi.ResolveJob(tj, r)
			if err != nil {
				t.Fatal(err)
			}
			opts := children.BuildOptions{LaunchImage: launchImg, LaunchAgentDelivery: tc.operatorDelivery, SCCs: tc.sccs}
			if tc.nodes != nil {
				opts.Nodes = func() []corev1.Node { return tc.nodes }
			}
			js, err := children.BuildJobSet(tj, r, job, opts)
			if err != nil {
				t.Fatal(err)
			}
			wantBin := bin
			if tc.fromVolume {
				wantBin = mpi.LaunchImageVolumeBinary
			}
			// The job's record keeps how the binary reached its pods.
			started, ok := mpi.DecodeJob(js.Annotations[api.AnnotationJob])
			if !ok {
				t.Fatalf("no job record on the JobSet: %v", js.Annotations)
			}
			if tc.fromVolume && (started.SSH.AgentDelivery != api.LaunchAgentByImageVolume || started.SSH.AgentBinary != wantBin) {
				t.Errorf("the record says delivery %q, binary %q; want %q, %q", started.SSH.AgentDelivery, started.SSH.AgentBinary, api.LaunchAgentByImageVolume, wantBin)
			}
			if started.SSH.AgentDelivery == api.LaunchAgentAuto {
				t.Errorf("the record keeps %q, not the delivery it settled on", api.LaunchAgentAuto)
			}
			for _, role := range []string{api.RoleLauncher, api.RoleWorker} {
				rjName := mpi.LauncherJob
				if role == api.RoleWorker {
					rjName = mpi.NodeJob
				}
				pod := replicatedJob(t, js, rjName).Template.Spec.Template.Spec
				ctr := pod.Containers[0]
				hasInit := slices.ContainsFunc(pod.InitContainers, func(c corev1.Container) bool { return c.Name == mpi.SSHInitContainer })
				if want := slices.Contains(tc.wantInit, role); hasInit != want {
					t.Fatalf("%s: setup init container %t, want %t", role, hasInit, want)
				}
				volume := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mpi.LaunchImageVolume })
				mounted := slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == mpi.LaunchImageVolume && m.MountPath == mpi.LaunchImageMountPath && m.ReadOnly
				})
				if wantVolume := tc.fromVolume && !hasInit; (volume >= 0) != wantVolume || mounted != wantVolume {
					t.Fatalf("%s: image volume %t, mounted read-only at %s %t; want %t: %v", role, volume >= 0, mpi.LaunchImageMountPath, mounted, wantVolume, pod.Volumes)
				}
				if volume >= 0 {
					if img := pod.Volumes[volume].Image; img == nil || img.Reference != launchImg || img.PullPolicy != corev1.PullIfNotPresent {
						t.Errorf("%s: the volume %+v is not Torus's image %s, pulled if not present", role, pod.Volumes[volume].VolumeSource, launchImg)
					}
				}
				// The client's key is where the container finds it, by
				// one mount or the other.
				key := ""
				for _, e := range ctr.Env {
					if e.Name == "TORUS_SSH_KEY" {
						key = e.Value
					}
				}
				if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == mpi.SSHVolume && strings.HasPrefix(key, m.MountPath+"/")
				}) {
					t.Errorf("%s: TORUS_SSH_KEY=%s is on no mount of the SSH volume: %v", role, key, ctr.VolumeMounts)
				}
				if hasInit {
					if len(ctr.Command) > 0 && ctr.Command[0] == wantBin {
						t.Errorf("%s runs %s, which it may lack", role, wantBin)
					}
					continue
				}
				argv := append(slices.Clone(ctr.Command), ctr.Args...)
				sep := slices.Index(argv, "--")
				if argv[0] != wantBin || argv[1] != "setup" || sep < 0 {
					t.Fatalf("%s runs %v, want %s setup ... -- ...", role, argv, wantBin)
				}
				if !slices.Contains(argv[:sep], "--install="+mpi.LaunchBinDir) || !slices.Contains(argv[:sep], "--dir="+mpi.SSHVolumeMountPath+"/"+mpi.SSHDirSubPath) {
					t.Errorf("%s: the setup does not install the binary and fill the volume's SSH directory: %v", role, argv[:sep])
				}
				next := argv[sep+1:]
				wantNext := []string{mpi.LaunchBinDir + "/" + mpi.LaunchBinary, "agent"}
				if role == api.RoleLauncher {
					wantNext = []string{mpi.LaunchBinDir + "/" + mpi.LaunchBinary, "wait"}
					if i := slices.Index(next, "--"); i < 0 || !slices.Equal(next[i+1:], []string{"mpirun", "/home/mpiuser/pi"}) {
						t.Errorf("the launcher runs %v after the setup, want the wait, then mpirun /home/mpiuser/pi", next)
					}
				}
				if !slices.Equal(next[:2], wantNext) {
					t.Errorf("%s runs %v after the setup, want %v ...", role, next, wantNext)
				}
				if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == mpi.EnvRestartAttempt && e.ValueFrom != nil }) {
					t.Errorf("%s: no %s for the setup's run: %v", role, mpi.EnvRestartAttempt, ctr.Env)
				}
				if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == mpi.LaunchVolume && m.MountPath == mpi.LaunchBinDir && !m.ReadOnly
				}) {
					t.Errorf("%s: the setup cannot install into %s: %v", role, mpi.LaunchBinDir, ctr.VolumeMounts)
				}
			}
		})
	}
}

// With a status server, every pod gets the job's token, the CA and the
// variables, and the launcher forwards them to the ranks; without one, no
// pod gets any.
func TestBuildJobSetStatusServer(t *testing.T) {
	rt := wrappers.MakeMPIRuntime("torus-openmpi", trainer.MPIImplementationOpenMPI)
	tj := wrappers.MakeTrainJob("digits", "team-a").RuntimeRef("torus-openmpi").NumNodes(2).Obj()
	job, err := mpi.ResolveJob(tj, rt.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	srv := &trainerstatus.Server{URL: "https://torus-webhook.torus-system.svc:443", CA: "PEM"}
	js, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{StatusServer: srv})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
		pod := replicatedJob(t, js, name).Template.Spec.Template
		if pod.Annotations[trainerstatus.AnnotationCA] != "PEM" {
			t.Errorf("%s pods carry no CA", name)
		}
		ctr := pod.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range ctr.Env {
			env[e.Name] = e.Value
		}
		if got := env[trainerstatus.EnvServerURL]; got != srv.URL+trainerstatus.Path("team-a", "digits") {
			t.Errorf("%s: %s=%q", name, trainerstatus.EnvServerURL, got)
		}
		if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == trainerstatus.Volume }) {
			t.Errorf("%s pods have no %s volume", name, trainerstatus.Volume)
		}
		if name == mpi.LauncherJob {
			forwarded := strings.Split(env["OMPI_MCA_mca_base_env_list"], ";")
			for _, v := range trainerstatus.EnvNames() {
				if !slices.Contains(forwarded, v) {
					t.Errorf("the launcher does not forward %s to the ranks: %v", v, forwarded)
				}
			}
		}
	}
	without, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
		pod := replicatedJob(t, without, name).Template.Spec.Template
		if _, ok := pod.Annotations[trainerstatus.AnnotationCA]; ok || slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == trainerstatus.Volume }) {
			t.Errorf("%s pods are wired to a status server no one named", name)
		}
	}
}
