package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

const (
	// fieldManager names kubectl-mpi migrate in managedFields.
	fieldManager = "kubectl-mpi-migrate"
	// clusterSource names the cluster in findings.
	clusterSource = "cluster"
)

var (
	mpiJobGVR          = kubeflow.SchemeGroupVersion.WithResource("mpijobs")
	trainJobGVR        = trainer.GroupVersion.WithResource("trainjobs")
	trainingRuntimeGVR = trainer.GroupVersion.WithResource("trainingruntimes")
)

// cluster reads MPIJobs from a cluster and creates their conversions in
// it. It goes through the dynamic client: the MPIJob CRD may well be gone,
// and its Go client is not needed.
type cluster struct {
	Client dynamic.Interface
	// Namespace is where MPIJobs are read, and where objects without a
	// namespace are created.
	Namespace string
	// AllNamespaces reads the MPIJobs of every namespace.
	AllNamespaces bool
	// DryRun has the API server check the objects without keeping them.
	DryRun bool
	// Out gets a line per object created; ErrOut the failures and notices.
	Out, ErrOut io.Writer
}

// Read converts the cluster's MPIJobs, one input each, written under an
// output directory as NAMESPACE/NAME.
func (c *cluster) Read(ctx context.Context, format outputFormat, opts Options) ([]inputFile, error) {
	ns := c.Namespace
	where := "namespace " + ns
	if c.AllNamespaces {
		ns, where = metav1.NamespaceAll, "any namespace"
	}
	list, err := c.Client.Resource(mpiJobGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("the cluster serves no MPIJobs (%s, resource %s): the MPIJob CRD of mpi-operator is not installed, so there is nothing to migrate from it; convert manifests with -f instead",
			MPIJobAPIVersion, mpiJobGVR.GroupResource())
	case err != nil:
		return nil, fmt.Errorf("listing MPIJobs in %s: %w", where, err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(c.ErrOut, "%s: no MPIJobs in %s\n", clusterSource, where)
	}
	out := make([]inputFile, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		// The names become a path under --output-dir: only what the API
		// server could have admitted as names is used as one.
		if problems := append(validation.IsDNS1123Label(u.GetNamespace()), validation.IsDNS1123Subdomain(u.GetName())...); len(problems) > 0 {
			it := &Item{Source: clusterSource, Namespace: u.GetNamespace(), Name: u.GetName(), Findings: []Finding{{Level: LevelError,
				Message: fmt.Sprintf("the server named an MPIJob %q in namespace %q, which are not valid names (%s): it is not converted", u.GetName(), u.GetNamespace(), strings.Join(problems, "; "))}}}
			out = append(out, inputFile{Items: []*Item{it}, Source: clusterSource})
			continue
		}
		out = append(out, inputFile{
			Items:   []*Item{convertObject(clusterSource, u.Object, opts)},
			OutPath: filepath.Join(u.GetNamespace(), u.GetName()+extension(format, ".yaml")),
			Source:  fmt.Sprintf("the cluster's MPIJob %s/%s", u.GetNamespace(), u.GetName()),
		})
	}
	return out, nil
}

// Apply creates each converted job's runtime and TrainJob, in that order,
// and reports each on Out. It returns how many failed.
func (c *cluster) Apply(ctx context.Context, items []*Item) int {
	opts := metav1.CreateOptions{FieldManager: fieldManager}
	suffix := "created"
	if c.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
		suffix = "created (server dry run)"
	}
	failures, passed := 0, 0
	for _, it := range items {
		if !it.Converted() {
			if !it.Failed() && !it.Blank {
				passed++
			}
			continue
		}
		objs, err := it.Created()
		if err != nil {
			fmt.Fprintf(c.ErrOut, "%s: %s: %v\n", it.Source, it.Describe(), err)
			failures++
			continue
		}
		dryRunRuntime, createdRuntime := "", ""
		for _, u := range objs {
			if u.GetNamespace() == "" {
				u.SetNamespace(c.Namespace)
			}
			gvr := trainJobGVR
			if u.GetKind() == trainer.TrainingRuntimeKind {
				gvr = trainingRuntimeGVR
			}
			ref := strings.ToLower(u.GetKind()) + "." + gvr.Group + "/" + u.GetName()
			err := c.create(ctx, gvr, u, opts, dryRunRuntime == "" && createdRuntime != "", createdRuntime)
			switch {
			case err == nil:
				fmt.Fprintf(c.Out, "%s %s\n", ref, suffix)
				if gvr == trainingRuntimeGVR {
					if c.DryRun {
						dryRunRuntime = u.GetName()
					} else {
						createdRuntime = u.GetName()
					}
				}
			case c.DryRun && dryRunRuntime != "" && u.GetKind() == trainer.TrainJobKind && OnlyRuntimeMissing(err, dryRunRuntime):
				// The webhook looks the runtime up, and a dry run kept none.
				fmt.Fprintf(c.Out, "%s checked (server dry run): accepted except for its runtime reference, TrainingRuntime %s, which only a real --apply creates\n", ref, dryRunRuntime)
			default:
				fmt.Fprintf(c.ErrOut, "%s: %s: creating %s in namespace %s: %v\n", it.Source, it.Describe(), ref, u.GetNamespace(), err)
				failures++
			}
		}
	}
	if passed > 0 {
		fmt.Fprintf(c.ErrOut, "%d documents passed through were not applied: apply them yourself if the jobs need them\n", passed)
	}
	return failures
}

// create creates one object. When retryMissingRuntime is set the TrainJob's
// runtime was created a moment ago, and admission webhooks that read
// runtimes from a cache may not see it yet: a refusal naming it is retried
// for a few seconds.
func (c *cluster) create(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, opts metav1.CreateOptions, retryMissingRuntime bool, runtime string) error {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 7}
	var err error
	werr := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		_, err = c.Client.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, opts)
		return err == nil || !retryMissingRuntime || u.GetKind() != trainer.TrainJobKind || !OnlyRuntimeMissing(err, runtime), nil
	})
	if err == nil && werr != nil && !wait.Interrupted(werr) {
		return werr
	}
	return err
}

// OnlyRuntimeMissing reports whether the API server refused a TrainJob
// only because the TrainingRuntime named runtime does not exist: every
// cause of the Invalid error is Torus's webhook saying so. That refusal is
// expected of a job checked or created together with its runtime (a dry
// run keeps no runtime; a webhook's cache may lag behind a new one), so
// run -f and migrate --apply both recognise it here.
func OnlyRuntimeMissing(err error, runtime string) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	causes := status.Status().Details.Causes
	if len(causes) == 0 {
		return false
	}
	want := fmt.Sprintf("%s %q not found", trainer.TrainingRuntimeKind, runtime)
	for _, c := range causes {
		if !strings.Contains(c.Message, want) {
			return false
		}
	}
	return true
}
