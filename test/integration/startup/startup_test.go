package startup_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/operator/app"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/samples"
	"github.com/torus-mpi/torus/test/framework"
)

var _ = Describe("An operator started before JobSet, Kueue and Multus are installed", Ordered, func() {
	var (
		env    *envtest.Environment
		c      client.Client
		probes string
		ctx    = context.Background()
	)

	// probe GETs a health endpoint: its status code and body.
	probe := func(path string) func() string {
		return func() string {
			resp, err := http.Get(probes + path)
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
	}

	BeforeAll(func() {
		var jobSetCRDs, kueueCRDs, nadCRDs string
		var paths []string
		for _, p := range framework.CRDPaths() {
			switch {
			case strings.Contains(p, "sigs.k8s.io/jobset"):
				jobSetCRDs = p
			case strings.Contains(p, "sigs.k8s.io/kueue"):
				kueueCRDs = p
			case strings.Contains(p, "network-attachment-definition-client"):
				nadCRDs = p
			default:
				paths = append(paths, p)
			}
		}
		Expect(jobSetCRDs).NotTo(BeEmpty())
		Expect(kueueCRDs).NotTo(BeEmpty())
		Expect(nadCRDs).NotTo(BeEmpty())
		env = &envtest.Environment{
			CRDDirectoryPaths:     paths,
			ErrorIfCRDPathMissing: true,
			WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(framework.RepoRoot(), "kustomize", "webhook")}},
		}
		cfg, err := env.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
		c, err = client.New(cfg, client.Options{Scheme: scheme.New()})
		Expect(err).NotTo(HaveOccurred())

		// The operator as its command builds it, from its flags.
		probePort := framework.FreePort()
		probes = fmt.Sprintf("http://127.0.0.1:%d", probePort)
		wh := env.WebhookInstallOptions
		var o app.Options
		fs := pflag.NewFlagSet("torus-operator", pflag.ContinueOnError)
		o.AddFlags(fs)
		Expect(fs.Parse([]string{
			"--metrics-bind-address=0", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
			"--leader-elect=false", "--install-default-runtimes=false", "--install-monitoring=false", "--launch-image=" + framework.LaunchImage,
			"--webhook-host=" + wh.LocalServingHost, fmt.Sprint("--webhook-port=", wh.LocalServingPort), "--webhook-cert-dir=" + wh.LocalServingCertDir,
		})).To(Succeed())
		mgr, err := app.NewManager(cfg, o)
		Expect(err).NotTo(HaveOccurred(), "the operator must start without JobSet's API")
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		DeferCleanup(func() {
			cancel()
			Eventually(done, time.Minute).Should(Receive(BeNil()))
		})

		install := func(path string) func() {
			return func() {
				_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{path}, ErrorIfPathMissing: true})
				Expect(err).NotTo(HaveOccurred())
			}
		}
		installJobSet, installKueue, installNADs = install(jobSetCRDs), install(kueueCRDs), install(nadCRDs)
	})

	It("serves its webhooks and is ready for them, saying what its controllers wait for", func() {
		Eventually(probe("/readyz/webhook"), framework.Timeout, framework.Interval).Should(Equal("200 ok"))
		Expect(probe("/readyz/controllers")()).To(And(HavePrefix("500"),
			ContainSubstring("waiting for the API server to serve JobSet (jobset.x-k8s.io/v1alpha2): install it; the controllers start once it is served")))
		Expect(probe("/healthz")()).To(Equal("200 ok"), "a live operator waiting for an API must not be restarted")

		rt, err := samples.Runtime("torus-openmpi")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Create(ctx, rt)).To(Succeed())
		tooBig := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: "default"},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt.Name},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](mpi.AbsoluteMaxNodes + 1)}},
		}
		err = c.Create(ctx, tooBig)
		Expect(err).To(HaveOccurred(), "the webhook admits what it must refuse")
		Expect(err.Error()).To(ContainSubstring("numNodes"))
		Expect(c.Create(ctx, &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: "default"},
			Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt.Name}, Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2)}},
		})).To(Succeed())
	})

	It("starts its controllers once JobSet is installed, and runs the job that waited", func() {
		installJobSet()
		Eventually(probe("/readyz/controllers"), 2*time.Minute, framework.Interval).Should(Equal("200 ok"))
		Eventually(func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: mpi.JobSetName("early")}, &jobsetv1alpha2.JobSet{})
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Eventually(func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: mpi.SSHSecretName("early")}, &corev1.Secret{})
		}, framework.Timeout, framework.Interval).Should(Succeed())
	})

	It("takes up Kueue once it is installed: a job queued before then says it waits for Kueue", func() {
		queued := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: "default", Labels: map[string]string{mpi.KueueQueueLabel: "team"}},
			Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torus-openmpi"}, Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2)}},
		}
		Expect(c.Create(ctx, queued)).To(Succeed())
		Eventually(func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: mpi.JobSetName("queued")}, &jobsetv1alpha2.JobSet{})
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(meta.FindStatusCondition(getJob(c, queued).Status.Conditions, trainjob.ConditionAdmitted)).To(BeNil(), "no Kueue yet: nothing to wait for")

		installKueue()
		// The operator looks for Kueue every 30s.
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(getJob(c, queued).Status.Conditions, trainjob.ConditionAdmitted)
		}, 2*time.Minute, time.Second).Should(And(Not(BeNil()),
			HaveField("Message", `Waiting for Kueue to queue the job in LocalQueue "team"`)))
	})

	It("takes up Multus once it is installed: a profile made before finds its NetworkAttachmentDefinition", func() {
		profile := &torusv1alpha1.MPINetworkProfile{
			ObjectMeta: metav1.ObjectMeta{Name: "ib"},
			Spec:       torusv1alpha1.MPINetworkProfileSpec{Networks: []torusv1alpha1.NetworkAttachment{{Name: "ib-sriov", Namespace: "default"}}},
		}
		Expect(c.Create(ctx, profile)).To(Succeed())
		ready := func() *metav1.Condition {
			var got torusv1alpha1.MPINetworkProfile
			Expect(c.Get(ctx, client.ObjectKeyFromObject(profile), &got)).To(Succeed())
			return meta.FindStatusCondition(got.Status.Conditions, "Ready")
		}
		Eventually(ready, framework.Timeout, framework.Interval).Should(And(Not(BeNil()),
			HaveField("Message", ContainSubstring("NetworkAttachmentDefinition default/ib-sriov does not exist"))))

		installNADs()
		Eventually(func() error {
			return c.Create(ctx, &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "ib-sriov", Namespace: "default",
				Annotations: map[string]string{mpi.NADResourceName: "nvidia.com/mlnx_ib"}}})
		}, framework.Timeout, framework.Interval).Should(Succeed())
		// The operator looks for Multus every 30s.
		Eventually(ready, 2*time.Minute, time.Second).Should(HaveField("Status", metav1.ConditionTrue))
	})
})

func getJob(c client.Client, tj *trainer.TrainJob) *trainer.TrainJob {
	GinkgoHelper()
	var got trainer.TrainJob
	Expect(c.Get(context.Background(), client.ObjectKeyFromObject(tj), &got)).To(Succeed())
	return &got
}

// installJobSet, installKueue and installNADs install JobSet's, Kueue's and
// Multus's CRDs into the suite's API server.
var installJobSet, installKueue, installNADs func()
