package migrate_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/corpus"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/app"
	"github.com/torus-mpi/torus/plugin/migrate"
	"github.com/torus-mpi/torus/test/framework"
)

// corpusDir holds real MPIJobs published by mpi-operator, shared by the
// project; MIGRATE_CORPUS points elsewhere.
func corpusDir() string {
	if d := os.Getenv("MIGRATE_CORPUS"); d != "" {
		return d
	}
	return corpus.Dir("mpijob-v2beta1")
}

// inputs are the corpus and the converter's own test inputs.
func inputs() []string {
	var files []string
	for _, pattern := range []string{
		filepath.Join(corpusDir(), "*.yaml"),
		filepath.Join(framework.RepoRoot(), "plugin", "migrate", "testdata", "input", "*"),
	} {
		m, err := filepath.Glob(pattern)
		Expect(err).NotTo(HaveOccurred())
		files = append(files, m...)
	}
	return files
}

var mpiJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}

var _ = Describe("Converted MPIJobs are accepted by the API server and Torus's webhooks", func() {
	It("from the whole corpus", func() {
		m, err := filepath.Glob(filepath.Join(corpusDir(), "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(m).To(HaveLen(5), "the MPIJob corpus in %s", corpusDir())
	})
	for _, f := range inputs() {
		for _, mode := range migrate.RuntimeModes {
			It(fmt.Sprintf("from %s with --runtime-mode=%s", filepath.Base(f), mode), func(sctx SpecContext) {
				data, err := os.ReadFile(f)
				Expect(err).NotTo(HaveOccurred())
				ns := fw.NewNamespace(sctx, "migrate")
				items := migrate.File(filepath.Base(f), data, migrate.Options{RuntimeMode: mode})
				converted := 0
				for _, it := range items {
					if !it.Converted() {
						continue
					}
					converted++
					objs, err := it.Created()
					Expect(err).NotTo(HaveOccurred())
					for _, obj := range objs {
						obj.SetNamespace(ns.Name)
						what := obj.GetKind() + " " + obj.GetName()
						if obj.GetKind() == trainer.TrainingRuntimeKind {
							// The TrainJob's webhook reads its runtime: keep it.
							Expect(fw.Client.Create(ctx, obj.DeepCopy(), client.DryRunAll)).To(Succeed(), "dry run of %s", what)
							Expect(fw.Client.Create(ctx, obj)).To(Succeed(), "creating %s", what)
							continue
						}
						Expect(obj.GetKind()).To(Equal(trainer.TrainJobKind))
						// Torus's webhooks read runtimes from the manager's
						// cache, which sees a new runtime a moment later.
						Eventually(func(g Gomega) {
							tj := obj.DeepCopy()
							g.Expect(fw.Client.Create(ctx, tj, client.DryRunAll)).To(Succeed())
							// The defaulting webhook recognised an MPI job.
							g.Expect(tj.GetLabels()).To(HaveKey(api.LabelImplementation))
						}, framework.Timeout, framework.Interval).Should(Succeed(), "dry run of %s", what)
					}
				}
				failed := 0
				for _, it := range items {
					if it.Failed() {
						failed++
					}
				}
				Expect(converted+failed).To(BeNumerically(">", 0), "%s holds no MPIJob", f)
			})
		}
	}
})

var _ = Describe("kubectl mpi migrate", Ordered, func() {
	var dyn dynamic.Interface
	BeforeAll(func() {
		var err error
		dyn, err = dynamic.NewForConfig(fw.Config)
		Expect(err).NotTo(HaveOccurred())
	})

	It("checks every corpus job with --apply --dry-run=server and creates nothing", func(sctx SpecContext) {
		ns := fw.NewNamespace(sctx, "dryrun")
		stdout, stderr, err := runMigrate("-f", corpusDir(), "--apply", "--dry-run=server", "-n", ns.Name)
		Expect(err).NotTo(HaveOccurred(), stderr)
		for _, job := range []string{"pi", "tensorflow-benchmarks", "tensorflow-mnist"} {
			Expect(stdout).To(ContainSubstring("trainingruntime.trainer.kubeflow.org/%s created (server dry run)", job))
			Expect(stdout).To(ContainSubstring("trainjob.trainer.kubeflow.org/%s checked (server dry run)", job))
		}
		Expect(stderr).To(ContainSubstring("migrate: 5 MPIJobs converted"))
		var jobs trainer.TrainJobList
		Expect(fw.Client.List(ctx, &jobs, client.InNamespace(ns.Name))).To(Succeed())
		Expect(jobs.Items).To(BeEmpty())
		var rts trainer.TrainingRuntimeList
		Expect(fw.Client.List(ctx, &rts, client.InNamespace(ns.Name))).To(Succeed())
		Expect(rts.Items).To(BeEmpty())
	})

	It("creates a job with --apply that Torus runs as an MPI JobSet", func(sctx SpecContext) {
		ns := fw.NewNamespace(sctx, "apply")
		stdout, stderr, err := runMigrate("-f", filepath.Join(corpusDir(), "tensorflow-mnist.yaml"), "--apply", "-n", ns.Name)
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(Equal("trainingruntime.trainer.kubeflow.org/tensorflow-mnist created\ntrainjob.trainer.kubeflow.org/tensorflow-mnist created\n"))

		var js jobsetv1alpha2.JobSet
		Eventually(func() error {
			return fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "tensorflow-mnist"}, &js)
		}, framework.Timeout, framework.Interval).Should(Succeed())
		Expect(js.Spec.ReplicatedJobs).To(HaveLen(2))
		node, launcher := js.Spec.ReplicatedJobs[0], js.Spec.ReplicatedJobs[1]
		Expect(node.Name).To(Equal(mpi.NodeJob))
		Expect(launcher.Name).To(Equal(mpi.LauncherJob))
		// The launcher starts with the workers, and waits for them.
		Expect(launcher.DependsOn).To(BeEmpty())
		Expect(*node.Template.Spec.Parallelism).To(BeEquivalentTo(2))

		worker := container(node.Template.Spec.Template.Spec.Containers, mpi.TrainerContainer)
		Expect(append(worker.Command, worker.Args...)).To(Equal(mpi.SSHDCommand("/root/.ssh")))
		Expect(worker.Resources.Limits.Memory().String()).To(Equal("4Gi"))
		l := container(launcher.Template.Spec.Template.Spec.Containers, mpi.TrainerContainer)
		Expect(l.Command).To(Equal([]string{"mpirun"}))
		Expect(l.Env).To(ContainElement(corev1.EnvVar{Name: mpi.EnvOMPIHostfile, Value: mpi.HostfilePath}))
		Expect(l.Resources.Limits.Memory().String()).To(Equal("2Gi"))
		Expect(l.VolumeMounts).To(ContainElement(HaveField("MountPath", "/root/.ssh")))
	})

	It("refuses, with file:line, a malformed file and still converts the others", func() {
		stdout, stderr, err := runMigrate("-f", filepath.Join(framework.RepoRoot(), "plugin", "migrate", "testdata", "input", "malformed.yaml"),
			"-f", filepath.Join(corpusDir(), "pi.yaml"))
		Expect(err).To(MatchError(ContainSubstring("2 documents could not be converted")))
		Expect(stderr).To(ContainSubstring("malformed.yaml:25: document: error: malformed YAML"))
		Expect(stderr).To(ContainSubstring("malformed.yaml:33: MPIJob wrong-type: error: spec.slotsPerWorker"))
		Expect(strings.Count(stdout, "kind: TrainJob\n")).To(Equal(2))
	})

	It("says so when the cluster has no MPIJob CRD", func() {
		_, _, err := runMigrate("--from-cluster", "-A")
		Expect(err).To(MatchError(ContainSubstring("the MPIJob CRD of mpi-operator is not installed, so there is nothing to migrate from it")))
	})

	It("converts the cluster's MPIJobs once the CRD is installed", func(sctx SpecContext) {
		crd := filepath.Join(framework.ModuleDir("github.com/kubeflow/mpi-operator"), "manifests", "base", "kubeflow.org_mpijobs.yaml")
		_, err := envtest.InstallCRDs(fw.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true})
		Expect(err).NotTo(HaveOccurred())

		ns := fw.NewNamespace(sctx, "cluster")
		for _, name := range []string{"pi.yaml", "tensorflow-mnist.yaml"} {
			for _, obj := range framework.ReadObjects(filepath.Join(corpusDir(), name)) {
				Eventually(func() error {
					_, err := dyn.Resource(mpiJobGVR).Namespace(ns.Name).Create(ctx, obj, metav1.CreateOptions{})
					return err
				}, framework.Timeout, framework.Interval).Should(Succeed())
			}
		}

		stdout, stderr, err := runMigrate("--from-cluster", "-n", ns.Name, "--runtime-mode=generate")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(ContainSubstring("kind: TrainJob"))
		Expect(strings.Count(stdout, "kind: TrainJob\n")).To(Equal(2))
		Expect(stderr).To(ContainSubstring("cluster: MPIJob %s/pi: note:", ns.Name))
		Expect(stderr).To(ContainSubstring("cluster: MPIJob %s/pi: note: metadata: uid, resourceVersion", ns.Name))

		out := GinkgoT().TempDir()
		_, stderr, err = runMigrate("--from-cluster", "-A", "--output-dir", out, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(filepath.Join(out, ns.Name, "pi.json")).To(BeAnExistingFile())
		Expect(filepath.Join(out, ns.Name, "tensorflow-mnist.json")).To(BeAnExistingFile())

		stdout, stderr, err = runMigrate("--from-cluster", "-n", ns.Name, "--apply")
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(ContainSubstring("trainjob.trainer.kubeflow.org/pi created"))
		var tj trainer.TrainJob
		Expect(fw.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "pi"}, &tj)).To(Succeed())
		Expect(*tj.Spec.Trainer.NumNodes).To(BeEquivalentTo(2))
	})

	It("fails under --strict when a field has no exact equivalent", func() {
		_, stderr, err := runMigrate("-f", filepath.Join(corpusDir(), "pi.yaml"), "--strict")
		Expect(err).To(MatchError(ContainSubstring("--strict: 2 warnings")))
		Expect(stderr).To(ContainSubstring("warning: spec.runPolicy.ttlSecondsAfterFinished"))
	})
})

func container(cs []corev1.Container, name string) corev1.Container {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	Fail("no container " + name)
	return corev1.Container{}
}

// runMigrate runs kubectl mpi migrate against the test API server.
func runMigrate(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	cmd := app.NewCmd(genericclioptions.NewConfigFlags(false), streams)
	cmd.SetArgs(append([]string{"migrate", "--kubeconfig", fw.Kubeconfig}, args...))
	err = cmd.ExecuteContext(ctx)
	GinkgoWriter.Printf("kubectl mpi migrate %s\n%s", strings.Join(args, " "), errOut.String())
	return out.String(), errOut.String(), err
}
