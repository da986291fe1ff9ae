package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// workloadOwnerKey indexes Kueue workloads by the JobSet that owns them.
const workloadOwnerKey = "torus.workload.owner.jobset"

func indexWorkloadOwner(o client.Object) []string {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "JobSet" {
			return []string{ref.Name}
		}
	}
	return nil
}

// workloadToTrainJob maps a workload to the TrainJob of its JobSet (same
// name, same namespace).
func workloadToTrainJob(_ context.Context, o client.Object) []reconcile.Request {
	owners := indexWorkloadOwner(o)
	if len(owners) == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: owners[0]}}}
}

// getWorkload finds the workload of the job's JobSet, if any (currentWorkload).
func (r *TrainJobReconciler) getWorkload(ctx context.Context, s *scope) (*kueue.Workload, error) {
	return r.workloadOf(ctx, s.jobSet)
}

// workloadOf finds the workload that stands for the JobSet js in the
// cache, if any (currentWorkload).
func (r *TrainJobReconciler) workloadOf(ctx context.Context, js metav1.Object) (*kueue.Workload, error) {
	var list kueue.WorkloadList
	if err := r.client.List(ctx, &list, client.InNamespace(js.GetNamespace()), client.MatchingFields{workloadOwnerKey: js.GetName()}); err != nil {
		return nil, fmt.Errorf("listing Kueue workloads: %w", err)
	}
	return currentWorkload(list.Items, js), nil
}

// currentWorkload picks, of the workloads listed, the one that stands for
// the JobSet js now: one Kueue made for js, its controller by UID (a
// workload left from an earlier JobSet of the same name neither admits nor
// reserves anything for this one); of several, which Kueue has while it
// replaces one whose JobSet changed, one not being deleted, then the
// newest, then by name, so that every reconcile picks the same one.
func currentWorkload(items []kueue.Workload, js metav1.Object) *kueue.Workload {
	var current *kueue.Workload
	for i := range items {
		wl := &items[i]
		if metav1.IsControlledBy(wl, js) && (current == nil || standsBefore(wl, current)) {
			current = wl
		}
	}
	return current
}

// standsBefore reports whether workload a stands for its JobSet rather
// than b (currentWorkload).
func standsBefore(a, b *kueue.Workload) bool {
	if aLive, bLive := a.DeletionTimestamp.IsZero(), b.DeletionTimestamp.IsZero(); aLive != bLive {
		return aLive
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

// syncAdmission writes trainjob.ConditionAdmitted from the workload, and returns the
// message saying why the job waits ("" once admitted).
func (s *scope) syncAdmission(queue string, wl *kueue.Workload) string {
	if wl == nil {
		msg := fmt.Sprintf("Waiting for Kueue to queue the job in LocalQueue %q", queue)
		s.setCondition(trainjob.ConditionAdmitted, metav1.ConditionFalse, trainjob.ReasonQueued, msg)
		return msg
	}
	wasAdmitted := isTrue(s.tj, trainjob.ConditionAdmitted)
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		cq := ""
		if wl.Status.Admission != nil {
			cq = string(wl.Status.Admission.ClusterQueue)
		}
		if s.setCondition(trainjob.ConditionAdmitted, metav1.ConditionTrue, trainjob.ReasonAdmitted,
			fmt.Sprintf("Kueue admitted the launcher and all workers together in ClusterQueue %q", cq)) {
			s.event(corev1.EventTypeNormal, trainjob.ReasonAdmitted, "Kueue admitted the job in ClusterQueue %q", cq)
			s.admittedNow = !wasAdmitted
		}
		return ""
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		again := "from the start"
		if s.job != nil && s.job.Checkpoint != nil {
			again = "from the program's last checkpoint in " + s.job.Checkpoint.Claim
		}
		msg := fmt.Sprintf("Kueue evicted the job (%s: %s); it waits in LocalQueue %q to run again %s", c.Reason, c.Message, queue, again)
		if s.setCondition(trainjob.ConditionAdmitted, metav1.ConditionFalse, trainjob.ReasonEvicted, msg) || wasAdmitted {
			s.event(corev1.EventTypeWarning, trainjob.ReasonRequeued, "%s", msg)
		}
		if wasAdmitted {
			s.recordEviction(fmt.Sprintf("%s: %s", c.Reason, c.Message))
		}
		return msg
	}
	msg := fmt.Sprintf("Waiting in LocalQueue %q for quota", queue)
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Message != "" {
		msg = fmt.Sprintf("Waiting in LocalQueue %q: %s", queue, c.Message)
	}
	s.setCondition(trainjob.ConditionAdmitted, metav1.ConditionFalse, trainjob.ReasonQueued, msg)
	return msg
}

// recordEviction adds Kueue's eviction of the admitted job to its record
// of restarts (trainjob.ConditionRestarted): its world stopped, and
// starts again once Kueue admits it, as a restart not the program's
// does. It is written with the Admitted condition's change that tells
// it, in the same status write, so a reconcile that fails to write
// records it again, once.
func (s *scope) recordEviction(cause string) {
	rec := trainjob.RestartsOf(s.tj)
	var run int32
	if s.jobSet != nil {
		run = s.jobSet.Status.Restarts
	}
	if s.job != nil {
		rec.Budget = s.job.MaxRestarts
	}
	rec.Evict(run, s.now, cause)
	s.setCondition(trainjob.ConditionRestarted, metav1.ConditionTrue, trainjob.ReasonEvicted, rec.Message())
	s.evictedNow = true
}

// quotaReserved reports whether Kueue holds quota for a JobSet through
// its workload wl and may still resume it: Kueue resumes the JobSet once
// the workload is admitted, at once where the ClusterQueue has no admission
// checks, after them where it has. A workload Kueue is taking back (evicted,
// to be deactivated or inactive, an admission check rejected or to be
// retried, being deleted) or has finished (a JobSet it could not start)
// resumes nothing, though its reservation may still show. wl is the
// JobSet's own (getWorkload).
func quotaReserved(wl *kueue.Workload) bool {
	if wl == nil || !wl.DeletionTimestamp.IsZero() || !ptr.Deref(wl.Spec.Active, true) {
		return false
	}
	for _, t := range []string{kueue.WorkloadEvicted, kueue.WorkloadDeactivationTarget, kueue.WorkloadFinished} {
		if meta.IsStatusConditionTrue(wl.Status.Conditions, t) {
			return false
		}
	}
	for _, c := range wl.Status.AdmissionChecks {
		if c.State == kueue.CheckStateRejected || c.State == kueue.CheckStateRetry {
			return false
		}
	}
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
}

// reservedAt is when Kueue reserved the quota the workload holds now, as
// the workload records it; "" while it holds none.
func reservedAt(wl *kueue.Workload) string {
	if wl == nil {
		return ""
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return c.LastTransitionTime.UTC().Format(time.RFC3339)
}

// reservationBehind reports whether the API server holds another of
// Kueue's reservations of a queued job's quota than the cache shows. The
// caches of pods and of workloads are fed by watches of their own: after
// an eviction and a new reservation the operator did not see (it was
// stopped, or its watch of workloads lagged), the new run's gated pods can
// reach the cache before the workload that says their run is another, and
// the cached workload still matches the evicted run's keys. The gate is
// lifted only once the cache has the reservation the API server has; its
// watch event brings the job back. One read, only for a queued job whose
// pods wait for Torus to lift the gate.
func (r *TrainJobReconciler) reservationBehind(ctx context.Context, s *scope) (bool, error) {
	if !r.kueue.Load() || !r.build.Queued(s.tj) || s.workload == nil {
		return false, nil
	}
	var live kueue.Workload
	switch err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(s.workload), &live); {
	case apierrors.IsNotFound(err):
		// Gone since: its deletion's watch event brings the job back.
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading Kueue workload %s: %w", s.workload.Name, err)
	}
	if reservedAt(&live) == reservedAt(s.workload) {
		return false, nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Holding the pods' gate: the cache is behind Kueue's reservation of the job's quota", "workload", live.Name)
	return true, nil
}

// keysPredateReservation reports whether a queued job's keys were made for
// another of Kueue's reservations of its quota than the one it holds now.
// Torus makes a queued job's keys once Kueue reserves its quota and deletes
// them when Kueue takes the quota back, so such keys belong to a run Kueue
// evicted: Kueue evicted the job and reserved its quota again between two
// looks of the operator, which never saw the job suspended. Both times are
// Kueue's, to the second. Keys that record no reservation are not judged.
func keysPredateReservation(secret *corev1.Secret, wl *kueue.Workload) bool {
	made, now := secret.Annotations[api.AnnotationQuotaReserved], reservedAt(wl)
	return made != "" && now != "" && made != now
}
