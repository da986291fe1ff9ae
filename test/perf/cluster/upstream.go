package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/test/localcluster/upstreamtrainer"
)

// upstreamRuntime is the name the benchmark gives its copy of upstream's
// published MPI runtime.
const upstreamRuntime = "upstream-mpi-local"

// upstreamContender installs upstream's published MPI runtime
// (deepspeed-distributed, from the module the cluster's
// trainer-controller-manager is built from) for a cluster started with
// test/localcluster -upstream-trainer, changed only where the real node needs it
// and where Torus's job differs in shape:
//   - image, pull policy and placement as Torus's local runtime has them:
//     the same Debian image, whose /home/mpiuser/.sshd_config is
//     mpi-operator's base configuration (port 2222), as upstream's images
//     have it;
//   - the launcher is not a node, so the job is Torus's: a launcher and 2
//     workers of 2 ranks.
//
// Upstream's images also carry an ssh client configuration (port 2222, no
// host key checking) that this image does not; the job's mpirun passes
// the same options, after upstream's own ConnectionAttempts.
func upstreamContender(ctx context.Context, c client.Client) (realContender, error) {
	rt, version, err := upstreamMPIRuntime()
	if err != nil {
		return realContender{}, err
	}
	var local trainer.ClusterTrainingRuntime
	if err := c.Get(ctx, client.ObjectKey{Name: localRuntime}, &local); err != nil {
		return realContender{}, fmt.Errorf("reading %s, which test/localcluster -real-node installs: %w", localRuntime, err)
	}
	if len(local.Spec.Template.Spec.ReplicatedJobs) == 0 {
		return realContender{}, fmt.Errorf("%s has no replicated jobs", localRuntime)
	}
	like := local.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	rt.ObjectMeta = metav1.ObjectMeta{Name: upstreamRuntime}
	rt.Spec.MLPolicy.MPI.RunLauncherAsNode = ptr.To(false)
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.NodeSelector = like.NodeSelector
		for j := range pod.Containers {
			pod.Containers[j].Image = like.Containers[0].Image
			pod.Containers[j].ImagePullPolicy = corev1.PullNever
		}
	}
	if err := c.Create(ctx, rt); err != nil {
		return realContender{}, fmt.Errorf("creating %s: %w", upstreamRuntime, err)
	}
	return realContender{
		label:   fmt.Sprintf("upstream Trainer %s (deepspeed-distributed, images aside)", version),
		runtime: upstreamRuntime,
		command: []string{"mpirun",
			"--mca", "plm_rsh_args", "-o ConnectionAttempts=10 -p 2222 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
			"-n", "4", "python3", "-c", initProbe},
	}, nil
}

// upstreamMPIRuntime reads upstream's published MPI runtime
// (deepspeed-distributed) from the module the cluster's
// trainer-controller-manager is built from, and that module's version.
func upstreamMPIRuntime() (*trainer.ClusterTrainingRuntime, string, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, "", err
	}
	dir, err := repo.ModuleDir(upstreamtrainer.Module, filepath.Join(root, "hack", "testbin", "controllers"))
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifests", "base", "runtimes", "deepspeed_distributed.yaml"))
	if err != nil {
		return nil, "", err
	}
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.Unmarshal(data, &rt); err != nil {
		return nil, "", fmt.Errorf("upstream's deepspeed-distributed runtime: %w", err)
	}
	if rt.Spec.MLPolicy == nil || rt.Spec.MLPolicy.MPI == nil {
		return nil, "", fmt.Errorf("upstream's deepspeed-distributed runtime is not an MPI runtime")
	}
	return &rt, filepath.Base(dir)[strings.LastIndex(filepath.Base(dir), "@")+1:], nil
}
