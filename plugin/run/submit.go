package run

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
	"github.com/torus-mpi/torus/plugin/cmdutil"
)

// fieldManager names kubectl-mpi in managedFields.
const fieldManager = "kubectl-mpi"

// jobPlan is what a run will create.
type jobPlan struct {
	TrainJob *trainer.TrainJob
	// Base is the runtime the job runs on, when read.
	Base *mpi.Runtime
	Job  *mpi.Job
	// Warnings did not stop the run.
	Warnings []string
	// Notes say what the job will meet: its queue's free quota now, a
	// namespace quota it would exceed.
	Notes []string
}

// prepare builds the TrainJob of a run and checks it against the cluster:
// the runtime exists and runs the implementation asked for, the name fits
// the pods' host names, the volumes do not hide Torus's files, and the
// queue exists and can ever admit the job.
func prepare(ctx context.Context, c client.Reader, spec Spec) (*jobPlan, error) {
	explicitRuntime := spec.Runtime != ""
	tj := BuildTrainJob(spec)
	return check(ctx, c, tj, spec.Implementation, explicitRuntime, spec.Volumes)
}

// check checks a TrainJob built from flags or copied for a rerun. impl is
// the implementation asked for ("" when not asked); vols are the volumes
// the job's runtime patch mounts.
func check(ctx context.Context, c client.Reader, tj *trainer.TrainJob, impl mpi.Implementation, explicitRuntime bool, vols []Volume) (*jobPlan, error) {
	plan := &jobPlan{TrainJob: tj}
	rt, err := trainjob.GetRuntime(ctx, c, tj)
	switch {
	case apierrors.IsForbidden(err):
		// Without the runtime's SSH directory; the webhook checks that.
		if err := validateVolumes(vols, ""); err != nil {
			return nil, err
		}
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("cannot read the job's runtime (%v); the API server will check the job", err))
		return plan, checkQueue(ctx, c, plan)
	case err != nil:
		var refErr *trainjob.RuntimeRefError
		if errors.As(err, &refErr) && refErr.NotFound {
			if !explicitRuntime && impl != "" {
				return nil, fieldErr(flagRuntime, "%w (it is the runtime Torus's operator installs for --mpi %s: ask your cluster admin; kubectl mpi doctor checks)", err, impl.CLIName())
			}
			if !explicitRuntime {
				return nil, fieldErr(flagRuntime, "%w (it is the default runtime Torus's operator installs: ask your cluster admin, or choose one with --runtime or --mpi; kubectl mpi doctor checks)", err)
			}
		}
		return nil, fieldErr(flagRuntime, "checking the runtime: %w", err)
	}
	if !rt.IsMPI() {
		return nil, fieldErr(flagRuntime, "%s %q has no mlPolicy.mpi, so Torus will not run it: choose an MPI runtime with --runtime or --mpi", rt.Kind, rt.Name)
	}
	plan.Base = rt
	rtImpl, err := mpi.ResolveImplementation(ptr.Deref(rt.Spec.MLPolicy.MPI.MPIImplementation, ""), tj.Annotations, rt.Annotations)
	if err != nil {
		return nil, err
	}
	if impl != "" && rtImpl != impl {
		// A runtime of the same Trainer value (Open MPI set to 5, say) runs
		// the other version when the job asks for it.
		if tj.Annotations == nil {
			tj.Annotations = map[string]string{}
		}
		if !impl.SelectOn(tj.Annotations, rtImpl) {
			return nil, fieldErr(flagMPI, "--mpi %s does not match %s %q, which runs %s: drop --runtime to use %s, or drop --mpi",
				impl.CLIName(), rt.Kind, rt.Name, rtImpl, impl.RuntimeName())
		}
	}
	job, err := mpi.ResolveJob(tj, rt)
	if err != nil {
		return nil, err
	}
	plan.Job = job
	// Checked again with the runtime's worker count when --workers is not
	// given.
	if problems := mpi.TrainJobNameProblems(tj.Name, job.Workers); len(problems) > 0 {
		return nil, fieldErr("name", "job name %q %s", tj.Name, strings.Join(problems, "; "))
	}
	if err := validateVolumes(vols, job.SSH.Path); err != nil {
		return nil, err
	}
	gpus, resources := mpi.GPUsPerNode(tj, rt)
	plan.Warnings = append(plan.Warnings, mpi.GPUWarnings(job, gpus, resources)...)
	plan.Warnings = append(plan.Warnings, noNodeOffers(ctx, c, resources)...)
	plan.Notes = append(plan.Notes, quotaRoom(ctx, c, tj.Namespace, podSets(tj, rt, job))...)
	return plan, checkQueue(ctx, c, plan)
}

// noNodeOffers warns of the GPU resources a job asks for that no node
// offers: its pods would wait unschedulable until one does. A user who may
// not list nodes is not told.
func noNodeOffers(ctx context.Context, c client.Reader, resources []corev1.ResourceName) []string {
	if len(resources) == 0 {
		return nil
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil
	}
	var out []string
	for _, r := range resources {
		offered := false
		for _, n := range nodes.Items {
			if q, ok := n.Status.Allocatable[r]; ok && !q.IsZero() {
				offered = true
				break
			}
		}
		if !offered {
			out = append(out, fmt.Sprintf("no node of the cluster's %d offers %s: the job's pods will wait unschedulable until one does (kubectl mpi doctor lists the GPU nodes)", len(nodes.Items), r))
		}
	}
	return out
}

// checkQueue finds the job's LocalQueue and tells when its ClusterQueue can
// never admit the job.
func checkQueue(ctx context.Context, c client.Reader, plan *jobPlan) error {
	tj := plan.TrainJob
	queue := tj.Labels[mpi.KueueQueueLabel]
	if queue == "" {
		return nil
	}
	var lq kueue.LocalQueue
	if err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: queue}, &lq); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return fieldErr(flagQueue, "LocalQueue %q not found in namespace %q: %s", queue, tj.Namespace, availableQueues(ctx, c, tj.Namespace))
		case apierrors.IsForbidden(err) || isNoKind(err):
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("cannot check LocalQueue %q: %v", queue, err))
			return nil
		}
		return fieldErr(flagQueue, "reading LocalQueue %q: %w", queue, err)
	}
	if plan.Base == nil || plan.Job == nil {
		return nil
	}
	var cq kueue.ClusterQueue
	if err := c.Get(ctx, client.ObjectKey{Name: string(lq.Spec.ClusterQueue)}, &cq); err != nil {
		if apierrors.IsNotFound(err) {
			return fieldErr(flagQueue, "LocalQueue %q points at ClusterQueue %q, which does not exist: ask your cluster admin", queue, lq.Spec.ClusterQueue)
		}
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("cannot check the quota of ClusterQueue %q: %v", lq.Spec.ClusterQueue, err))
		return nil
	}
	sets := podSets(tj, plan.Base, plan.Job)
	if why := neverFits(&cq, sets); why != "" {
		return fieldErr(flagQueue, "LocalQueue %q can never admit this job: %s. Ask for fewer workers or resources, or use another queue", queue, why)
	}
	if fit := fitNow(&cq, sets); fit != "" {
		plan.Notes = append(plan.Notes, fit)
	}
	return nil
}

func availableQueues(ctx context.Context, c client.Reader, ns string) string {
	var list kueue.LocalQueueList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) == 0 {
		return "the namespace has no LocalQueue (kubectl mpi doctor lists the queues you may use)"
	}
	names := make([]string, 0, len(list.Items))
	for _, q := range list.Items {
		names = append(names, q.Name)
	}
	sort.Strings(names)
	return "use one of " + strings.Join(names, ", ")
}

func isNoKind(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "no matches for kind") || strings.Contains(err.Error(), "the server could not find the requested resource"))
}

// submitPlan creates what a plan holds. With cmdutil.DryRunServer the API
// server and its webhooks check the objects without keeping them; with
// cmdutil.DryRunClient nothing is sent.
func submitPlan(ctx context.Context, c client.Client, plan *jobPlan, dryRun string) error {
	tj := plan.TrainJob
	switch dryRun {
	case cmdutil.DryRunClient:
		return nil
	case cmdutil.DryRunServer:
		if err := c.Create(ctx, tj, client.DryRunAll, client.FieldOwner(fieldManager)); err != nil {
			return fmt.Errorf("checking TrainJob %s: %w", tj.Name, err)
		}
		return nil
	}
	if err := c.Create(ctx, tj, client.FieldOwner(fieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fieldErr("name", "MPI job %q already exists in namespace %q: choose another name, delete it (kubectl mpi delete %s) or rerun it (kubectl mpi rerun %s)", tj.Name, tj.Namespace, tj.Name, tj.Name)
		}
		return fmt.Errorf("creating TrainJob %s: %w", tj.Name, err)
	}
	return nil
}
