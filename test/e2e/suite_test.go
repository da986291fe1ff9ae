// Package e2e runs MPI jobs on the local cluster (make cluster-up): a real
// kube-apiserver, controller-manager and scheduler, kwok nodes and pods, the
// JobSet and Kueue controllers and the Torus operator, all separate
// processes.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/test/framework"
)

var (
	k8sClient client.Client
	// restConfig reaches the cluster, for clients other than k8sClient.
	restConfig *rest.Config
	ctx        = context.Background()
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End to end on the local cluster")
}

var _ = BeforeSuite(func() {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(framework.RepoRoot(), ".cluster", "kubeconfig")
	}
	_, err := os.Stat(kubeconfig)
	Expect(err).NotTo(HaveOccurred(), "no local cluster: run `make test-e2e`, which starts one with `make cluster-up`")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 100, 200
	restConfig = cfg
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	installRuntimes()
})

// clusterLogs marks where the cluster's component logs stood when the
// running spec began.
var clusterLogs *framework.ClusterLogs

var _ = BeforeEach(func() {
	clusterLogs = framework.MarkClusterLogs(filepath.Dir(clusterKubeconfig()))
})

// A failed spec reports every TrainJob of the cluster that has not
// completed: its description (the failing rank, its cause, the end of its
// own output) and its ranks' last log lines, before the spec's clean-up
// deletes them; a job already being deleted, an earlier spec's, gets a
// line. Then what the control plane logged while the spec ran: its
// warnings, errors and slow requests, for the failures no job shows, such
// as a request the API server refused.
var _ = JustAfterEach(func() {
	if !CurrentSpecReport().Failed() {
		return
	}
	var jobs trainer.TrainJobList
	if err := k8sClient.List(ctx, &jobs); err != nil {
		AddReportEntry("TrainJobs", "listing them: "+err.Error())
	}
	var b, deleting strings.Builder
	for _, tj := range jobs.Items {
		if trainjob.StateOf(&tj).Phase == trainjob.PhaseComplete {
			continue
		}
		if tj.DeletionTimestamp != nil {
			fmt.Fprintf(&deleting, "%s/%s: being deleted since %s\n", tj.Namespace, tj.Name, tj.DeletionTimestamp.UTC().Format(time.TimeOnly))
			continue
		}
		d := mpiCmd("-n", tj.Namespace, "describe", tj.Name)
		l := mpiCmd("-n", tj.Namespace, "logs", tj.Name, "--tail", "20")
		fmt.Fprintf(&b, "--- %s/%s\n%s%s--- its ranks' last lines\n%s%s\n", tj.Namespace, tj.Name, d.Stdout, d.Stderr, l.Stdout, l.Stderr)
	}
	if deleting.Len() > 0 {
		AddReportEntry("TrainJobs being deleted", deleting.String())
	}
	if b.Len() > 0 {
		AddReportEntry("TrainJobs that did not complete", b.String())
	}
	clusterLogs.Report()
})
