package wire_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/test/framework"
)

// generated is what the operator made for one TrainJob, read back from the
// API server: the test runs these objects, it never derives them itself.
type generated struct {
	trainJob *trainer.TrainJob
	runtime  *trainer.ClusterTrainingRuntime
	jobSet   *jobsetv1alpha2.JobSet
	// secret holds the keys and the hostfile.
	secret *corev1.Secret
}

// newTrainJob creates a TrainJob on a toolchain's sample runtime whose
// launcher runs the toolchain's test program on every slot, and waits until
// the operator has made its JobSet and Secret (SSH keys and hostfile).
func newTrainJob(ctx context.Context, namespace, name string, tc *toolchain, workers, slots int32, opts ...func(*trainer.TrainJob)) *generated {
	GinkgoHelper()
	tj := wrappers.MakeTrainJob(name, namespace).RuntimeRef(tc.runtime).
		NumNodes(workers).NumProcPerNode(slots).Command("mpirun").Obj()
	for _, o := range opts {
		o(tj)
	}
	// The wire test is OpenSSH's: real sshd and ssh between the namespaces
	// (the default runtimes use Torus's launch agent).
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	if _, set := tj.Annotations[api.AnnotationRemoteLaunch]; !set {
		tj.Annotations[api.AnnotationRemoteLaunch] = api.RemoteLaunchOpenSSH
	}
	// Only the rank count and the program are the job's own; everything
	// about hosts and ssh must come from the operator.
	tj.Spec.Trainer.Args = []string{"-n", strconv.Itoa(int(workers * slots)), tc.program}
	Expect(fw.Client.Create(ctx, tj)).To(Succeed(), "creating TrainJob %s", name)

	g := &generated{trainJob: tj}
	Eventually(func(gm Gomega) {
		key := func(n string) client.ObjectKey { return client.ObjectKey{Namespace: namespace, Name: n} }
		// The names docs/contributors/architecture.md documents, spelled out rather than
		// taken from the operator's code.
		var js jobsetv1alpha2.JobSet
		gm.Expect(fw.Client.Get(ctx, key(name), &js)).To(Succeed(), "JobSet")
		var s corev1.Secret
		gm.Expect(fw.Client.Get(ctx, key(name+"-mpi-ssh"), &s)).To(Succeed(), "SSH Secret")
		g.jobSet, g.secret = &js, &s
	}, framework.Timeout, framework.Interval).Should(Succeed(), "the operator makes the objects of TrainJob %s", name)

	var rt trainer.ClusterTrainingRuntime
	Expect(fw.Client.Get(ctx, client.ObjectKey{Name: tc.runtime}, &rt)).To(Succeed())
	g.runtime = &rt
	return g
}

// podSpec is the pod template of a replicated job.
func (g *generated) podSpec(replicatedJob string) (*corev1.PodSpec, int32, error) {
	for i := range g.jobSet.Spec.ReplicatedJobs {
		rj := &g.jobSet.Spec.ReplicatedJobs[i]
		if rj.Name != replicatedJob {
			continue
		}
		// Host names, and so the hostfile, assume one Job per
		// replicated job.
		if rj.Replicas != 1 {
			return nil, 0, fmt.Errorf("replicated job %q has %d Jobs; the operator makes one", replicatedJob, rj.Replicas)
		}
		pods := int32(1)
		if p := rj.Template.Spec.Parallelism; p != nil {
			pods = *p
		}
		return &rj.Template.Spec.Template.Spec, pods, nil
	}
	return nil, 0, fmt.Errorf("JobSet %s has no replicated job %q", g.jobSet.Name, replicatedJob)
}

// sshPath is the pods' SSH directory, as the runtime names it.
func (g *generated) sshPath() string {
	if p := g.runtime.Spec.MLPolicy.MPI.SSHAuthMountPath; p != nil {
		return *p
	}
	return mpi.DefaultSSHPath
}

// hostfileHosts are the host names of the hostfile, in order; the slots
// part of each line ("slots=N" for Open MPI, ":N" for Hydra) is dropped.
func (g *generated) hostfileHosts() []string {
	var hosts []string
	for _, line := range strings.Split(g.hostfile(), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		host, _, _ := strings.Cut(fields[0], ":")
		hosts = append(hosts, host)
	}
	return hosts
}

// hostfile is the hostfile the operator wrote into the job's Secret.
func (g *generated) hostfile() string { return string(g.secret.Data[mpi.HostfileKey]) }

// mainContainer is the container Trainer fields apply to.
func mainContainer(ps *corev1.PodSpec) (*corev1.Container, error) {
	for i := range ps.Containers {
		if ps.Containers[i].Name == mpi.TrainerContainer {
			return &ps.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("pod template has no container %q", mpi.TrainerContainer)
}

// assignUID gives every container of the job's pods a UID, as OpenShift's
// SCC admission does for pods that ask for none.
func assignUID(g *generated, uid int64) {
	for i := range g.jobSet.Spec.ReplicatedJobs {
		ps := &g.jobSet.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for _, ctrs := range [][]corev1.Container{ps.InitContainers, ps.Containers} {
			for j := range ctrs {
				if ctrs[j].SecurityContext == nil {
					ctrs[j].SecurityContext = &corev1.SecurityContext{}
				}
				ctrs[j].SecurityContext.RunAsUser = &uid
			}
		}
	}
}
