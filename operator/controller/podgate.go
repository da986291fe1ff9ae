package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// PodGatePath is where the operator's webhook server admits the pods of
// MPI jobs (podGate).
const PodGatePath = "/mutate--v1-pod"

// The configuration selects pods by Torus's job label (kustomize/base) and
// ignores failures: a pod the webhook does not answer for keeps its gate,
// which the reconcile removes as before, so the webhook only ever saves a
// write and never holds a pod.
//
// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.torus-mpi.io,admissionReviewVersions=v1,timeoutSeconds=5

// podGate admits a queued job's pod without Torus's gate
// (api.SchedulingGateSSHKeys) when its run's keys are already Torus's own,
// so that the pods Kueue's admission brings do not each wait for a PATCH
// that ungates them: the Job controller creates a large job's pods over
// seconds to minutes, most of them after the operator made the keys. Only
// the first run's pods are admitted so: a restarted run's wait behind the
// gate also spans its back-off (restartHold), which the reconcile keeps.
type podGate struct {
	r *TrainJobReconciler
}

// Handle answers one pod's admission: the pod unchanged, or without
// Torus's gate.
func (g podGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	var pod gatedPod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding pod: %w", err))
	}
	i := slices.IndexFunc(pod.Spec.SchedulingGates, func(gate corev1.PodSchedulingGate) bool {
		return gate.Name == api.SchedulingGateSSHKeys
	})
	if i < 0 {
		return admission.Allowed("")
	}
	job := pod.Metadata.Labels[api.LabelJobName]
	if job == "" || pod.Metadata.Labels[mpi.LabelJobSetRestartAttempt] != "0" {
		return admission.Allowed("")
	}
	ready, err := g.r.firstRunKeysMade(ctx, client.ObjectKey{Namespace: req.Namespace, Name: job})
	if err != nil {
		// Allowed, gate kept: the reconcile ungates the pod.
		ctrl.LoggerFrom(ctx).V(2).Info("Admitting a pod behind its gate", "trainJob", job, "reason", err.Error())
		return admission.Allowed("")
	}
	if !ready {
		return admission.Allowed("")
	}
	// One operation on the gate alone: a pod decoded and encoded again
	// would lose the fields this operator's API version does not know.
	resp := admission.Patched("the job's SSH keys are made",
		jsonpatch.JsonPatchOperation{Operation: "test", Path: fmt.Sprintf("/spec/schedulingGates/%d/name", i), Value: api.SchedulingGateSSHKeys},
		jsonpatch.JsonPatchOperation{Operation: "remove", Path: fmt.Sprintf("/spec/schedulingGates/%d", i)},
	)
	return resp
}

// gatedPod is what podGate reads of a pod: every pod of a large job is
// admitted through it, and decoding only these fields spares building the
// rest of each pod (its containers, volumes, probes) to throw away.
type gatedPod struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates"`
	} `json:"spec"`
}

// firstRunKeysMade reports whether the keys of the job's first run are in
// the cache, proven made by Torus for this TrainJob, and, for a queued
// job, made for Kueue's current reservation of its quota: the keys the
// pods of the JobSet's first run mount.
func (r *TrainJobReconciler) firstRunKeysMade(ctx context.Context, key client.ObjectKey) (bool, error) {
	var tj trainer.TrainJob
	if err := r.client.Get(ctx, key, &tj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	var secret corev1.Secret
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: mpi.SSHSecretName(key.Name)}, &secret); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !secret.DeletionTimestamp.IsZero() || !r.proofs.made(childSecret, &secret, &tj) {
		return false, nil
	}
	if run, err := strconv.Atoi(secret.Annotations[api.AnnotationJobSetRestarts]); err != nil || run != 0 {
		return false, nil
	}
	if !r.kueue.Load() || !r.build.Queued(&tj) {
		return true, nil
	}
	// Keys made for another reservation of the job's quota than Kueue's
	// current one are those of a run Kueue evicted, which the reconcile
	// replaces before it lets the pods start (keysOfEvictedRun).
	var js jobsetv1alpha2.JobSet
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: mpi.JobSetName(key.Name)}, &js); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	wl, err := r.workloadOf(ctx, &js)
	if err != nil {
		return false, err
	}
	return !keysPredateReservation(&secret, wl), nil
}

// registerPodGate serves podGate on the manager's webhook server.
func registerPodGate(mgr ctrl.Manager, r *TrainJobReconciler) {
	hook := &webhook.Admission{Handler: podGate{r: r}}
	mgr.GetWebhookServer().Register(PodGatePath, hook)
}
