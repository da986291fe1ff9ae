package controller

import (
	"slices"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// Kueue's eviction of an admitted job goes into its record of restarts
// once, with Kueue's words and the run it stopped; a job evicted before
// it was admitted, or seen evicted again, adds nothing.
func TestSyncAdmissionRecordsEvictions(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	admitted := metav1.Condition{Type: trainjob.ConditionAdmitted, Status: metav1.ConditionTrue, Reason: trainjob.ReasonAdmitted, LastTransitionTime: metav1.NewTime(t0)}
	evictedWL := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{
		Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a workload due to prioritization in the ClusterQueue",
	}}}}
	js := &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{Restarts: 2}}

	s := &scope{tj: &trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{admitted}}}, jobSet: js, now: t0.Add(time.Minute)}
	s.syncAdmission("team", evictedWL)
	if !s.evictedNow {
		t.Fatal("the eviction of an admitted job was not taken")
	}
	rec := trainjob.RestartsOf(s.tj)
	if rec.Evictions != 1 || len(rec.Latest) != 1 || !rec.Latest[0].Evicted || rec.Latest[0].Run != 2 ||
		rec.Latest[0].Cause != "Preempted: Preempted to accommodate a workload due to prioritization in the ClusterQueue" {
		t.Fatalf("record after the eviction: %+v", rec)
	}
	if c := meta.FindStatusCondition(s.tj.Status.Conditions, trainjob.ConditionRestarted); c == nil || c.Reason != trainjob.ReasonEvicted {
		t.Errorf("Restarted condition: %+v", c)
	}

	// The next reconcile finds the job already evicted: nothing more.
	again := &scope{tj: s.tj.DeepCopy(), jobSet: js, now: t0.Add(2 * time.Minute)}
	again.syncAdmission("team", evictedWL)
	if again.evictedNow || trainjob.RestartsOf(again.tj).Evictions != 1 {
		t.Errorf("an eviction seen again was recorded again: %+v", trainjob.RestartsOf(again.tj))
	}

	// A job Kueue never admitted has no run to stop.
	never := &scope{tj: &trainer.TrainJob{}, jobSet: js, now: t0}
	never.syncAdmission("team", evictedWL)
	if never.evictedNow || meta.FindStatusCondition(never.tj.Status.Conditions, trainjob.ConditionRestarted) != nil {
		t.Errorf("an eviction before admission was recorded: %v", never.tj.Status.Conditions)
	}
}

// A queued job's keys are wanted once Kueue reserves quota for its JobSet,
// before Kueue resumes it, and not while the reservation is another
// JobSet's, taken back, or the user holds the job.
func TestWantsKeys(t *testing.T) {
	suspended := func() *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "js-1"}, Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true)}}
	}
	workload := func(conds ...metav1.Condition) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "jobset-pi"}, Status: kueue.WorkloadStatus{Conditions: conds}}
	}
	with := func(wl *kueue.Workload, change func(*kueue.Workload)) *kueue.Workload {
		change(wl)
		return wl
	}
	cond := func(t string, s metav1.ConditionStatus) metav1.Condition { return metav1.Condition{Type: t, Status: s} }
	reserved := cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue)
	pending := cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse)
	evicted := cond(kueue.WorkloadEvicted, metav1.ConditionTrue)
	cases := map[string]struct {
		queued, userSuspend bool
		jobSet              *jobsetv1alpha2.JobSet
		workload            *kueue.Workload
		want                bool
	}{
		"queued, no workload yet":      {queued: true, jobSet: suspended()},
		"queued, waiting for quota":    {queued: true, jobSet: suspended(), workload: workload(pending)},
		"queued, quota reserved":       {queued: true, jobSet: suspended(), workload: workload(reserved), want: true},
		"queued, reserved but evicted": {queued: true, jobSet: suspended(), workload: workload(reserved, evicted)},
		"queued, reserved again after an eviction": {queued: true, jobSet: suspended(),
			workload: workload(reserved, cond(kueue.WorkloadEvicted, metav1.ConditionFalse)), want: true},
		"queued, reserved, to be deactivated": {queued: true, jobSet: suspended(),
			workload: workload(reserved, cond(kueue.WorkloadDeactivationTarget, metav1.ConditionTrue))},
		"queued, reserved, deactivated": {queued: true, jobSet: suspended(),
			workload: with(workload(reserved), func(wl *kueue.Workload) { wl.Spec.Active = ptr.To(false) })},
		"queued, reserved, finished: Kueue could not start the JobSet": {queued: true, jobSet: suspended(),
			workload: workload(reserved, cond(kueue.WorkloadFinished, metav1.ConditionTrue))},
		"queued, reserved, being deleted": {queued: true, jobSet: suspended(),
			workload: with(workload(reserved), func(wl *kueue.Workload) { wl.DeletionTimestamp = ptr.To(metav1.Now()) })},
		"queued, reserved, an admission check pending": {queued: true, jobSet: suspended(), want: true,
			workload: with(workload(reserved), func(wl *kueue.Workload) {
				wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "prov", State: kueue.CheckStatePending}}
			})},
		"queued, reserved, an admission check rejected": {queued: true, jobSet: suspended(),
			workload: with(workload(reserved), func(wl *kueue.Workload) {
				wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "prov", State: kueue.CheckStateRejected}}
			})},
		"queued, reserved, an admission check to be retried": {queued: true, jobSet: suspended(),
			workload: with(workload(reserved), func(wl *kueue.Workload) {
				wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "prov", State: kueue.CheckStateRetry}}
			})},
		"queued, reserved, the user suspends the job": {queued: true, userSuspend: true, jobSet: suspended(),
			workload: workload(reserved)},
		"queued, resumed by Kueue":                 {queued: true, jobSet: &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{UID: "js-1"}}, want: true},
		"not queued, a reservation does not count": {jobSet: suspended(), workload: workload(reserved)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &scope{tj: &trainer.TrainJob{Spec: trainer.TrainJobSpec{Suspend: ptr.To(tc.userSuspend)}}, jobSet: tc.jobSet, workload: tc.workload}
			if got := s.wantsKeys(&jobsetv1alpha2.JobSet{}, tc.queued); got != tc.want {
				t.Errorf("wantsKeys = %v, want %v", got, tc.want)
			}
		})
	}
}

// Of the workloads that name the JobSet, the one Kueue made for it stands
// for it: live before one being deleted, then the newest, then by name,
// whatever order the cache lists them in.
func TestCurrentWorkload(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "js-2"}}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	wl := func(name, owner string, created metav1.Time, deleting bool) kueue.Workload {
		w := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: jobsetv1alpha2.SchemeGroupVersion.String(), Kind: "JobSet", Name: "pi", UID: types.UID(owner), Controller: ptr.To(true),
		}}}}
		if deleting {
			w.DeletionTimestamp = &t1
		}
		return w
	}
	cases := map[string]struct {
		items []kueue.Workload
		want  string
	}{
		"none":                                {},
		"one of an earlier JobSet, same name": {items: []kueue.Workload{wl("old", "js-1", t1, false)}},
		"the newest":                          {items: []kueue.Workload{wl("a", "js-2", t0, false), wl("b", "js-2", t1, false)}, want: "b"},
		"the newest of this JobSet":           {items: []kueue.Workload{wl("a", "js-2", t0, false), wl("b", "js-1", t1, false)}, want: "a"},
		"a live one before a newer being deleted": {items: []kueue.Workload{wl("a", "js-2", t0, false), wl("b", "js-2", t1, true)}, want: "a"},
		"created in the same second: by name":     {items: []kueue.Workload{wl("a", "js-2", t1, false), wl("b", "js-2", t1, false)}, want: "b"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reversed := slices.Clone(tc.items)
			slices.Reverse(reversed)
			for _, items := range [][]kueue.Workload{tc.items, reversed} {
				got := ""
				if w := currentWorkload(items, js); w != nil {
					got = w.Name
				}
				if got != tc.want {
					t.Errorf("currentWorkload = %q, want %q (listed first: %s)", got, tc.want, items[0].Name)
				}
			}
		})
	}
}

// Keys made for another reservation of a queued job's quota than the one
// its workload holds now are those of a run Kueue evicted; keys made for
// this one are its own, and keys are not judged while Kueue reserves
// nothing or where they record no reservation.
func TestKeysPredateReservation(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	reserved := func(at time.Time, status metav1.ConditionStatus) *kueue.Workload {
		return &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{
			Type: kueue.WorkloadQuotaReserved, Status: status, Reason: "QuotaReserved", LastTransitionTime: metav1.NewTime(at),
		}}}}
	}
	for _, tc := range []struct {
		name string
		made string
		wl   *kueue.Workload
		want bool
	}{
		{name: "made for this reservation", made: "2026-12-01T10:00:00Z", wl: reserved(t0, metav1.ConditionTrue)},
		{name: "made for an earlier reservation", made: "2026-12-01T09:58:00Z", wl: reserved(t0, metav1.ConditionTrue), want: true},
		{name: "no reservation now", made: "2026-12-01T09:58:00Z", wl: reserved(t0, metav1.ConditionFalse)},
		{name: "no condition", made: "2026-12-01T09:58:00Z", wl: &kueue.Workload{}},
		{name: "no workload", made: "2026-12-01T09:58:00Z"},
		{name: "no reservation recorded", wl: reserved(t0, metav1.ConditionTrue)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := &corev1.Secret{}
			if tc.made != "" {
				secret.Annotations = map[string]string{api.AnnotationQuotaReserved: tc.made}
			}
			if got := keysPredateReservation(secret, tc.wl); got != tc.want {
				t.Errorf("keysPredateReservation = %v, want %v", got, tc.want)
			}
		})
	}
}
