// Package operatorstatus tells whether the Torus operator is running, from
// its leader-election lease. Commands that wait for a job (run --wait,
// wait, rerun --wait), describe and doctor share it, so that a dead
// operator is named as such instead of looking like a slow one: without
// the operator no TrainJob gets a JobSet or a new condition.
package operatorstatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LeaseName is the operator's leader-election lease (LeaderElectionID in
// operator/app/app.go).
const LeaseName = "torus-operator.torus-mpi.io"

// DefaultNamespace is where the operator runs unless installed elsewhere
// (kustomize and the local cluster; OLM may use another namespace). It is
// looked at when leases may not be listed cluster-wide.
const DefaultNamespace = "torus-system"

// defaultLeaseDuration is controller-runtime's, for a lease that does not
// say.
const defaultLeaseDuration = 15 * time.Second

// Status is what the lease says about the operator.
type Status struct {
	// Known: the lease was found, so Running is a finding and not a guess.
	// It is false when leases cannot be read (Err says why) and when there
	// is none (NeverRan): an operator may run without leader election
	// (--leader-elect=false, as in tests), so a missing lease proves
	// nothing about one that is running now.
	Known bool
	// Running: a replica holds the lease and renewed it within twice its
	// duration. Fail-over to a restarted replica takes up to the lease
	// duration plus a retry period, so a lease that is merely expired is
	// not yet a dead operator.
	Running bool
	// NeverRan: leases could be listed cluster-wide and none is the
	// operator's: no operator has run here (with leader election).
	NeverRan bool
	// Namespace, Holder, LastRenewal and LeaseDuration come from the lease
	// (the most recently renewed one when several namespaces hold one).
	// LastRenewal is zero when it was never renewed.
	Namespace     string
	Holder        string
	LastRenewal   time.Time
	LeaseDuration time.Duration
	// Age is how long before the check the lease was last renewed.
	Age time.Duration
	// Err says why the lease could not be read.
	Err error
}

// Down reports whether the operator is known not to be running: only then
// may a command stop waiting for it.
func (s Status) Down() bool { return s.Known && !s.Running }

// Message says what the lease shows, as a clause for the user.
func (s Status) Message() string {
	switch {
	case s.Running:
		return fmt.Sprintf("the Torus operator is running (%s renewed its lease %s ago in namespace %s)", s.Holder, duration.HumanDuration(s.Age), s.Namespace)
	case s.Known && s.LastRenewal.IsZero():
		return fmt.Sprintf("the Torus operator is not running (its lease in namespace %s was never renewed)", s.Namespace)
	case s.Known && s.Holder == "":
		return fmt.Sprintf("the Torus operator is not running (no replica holds its lease; last lease renewal %s ago in namespace %s)", duration.HumanDuration(s.Age), s.Namespace)
	case s.Known:
		return fmt.Sprintf("the Torus operator is not running (last lease renewal %s ago in namespace %s)", duration.HumanDuration(s.Age), s.Namespace)
	case s.NeverRan:
		return "no Torus operator has ever run in this cluster (no leader lease " + LeaseName + ")"
	case s.Err != nil:
		return "cannot tell whether the Torus operator is running: " + s.Err.Error()
	}
	return "cannot tell whether the Torus operator is running"
}

// Fix says where to look; empty when the operator runs.
func (s Status) Fix() string {
	switch {
	case s.Running:
		return ""
	case s.Known:
		return fmt.Sprintf("check its pods and logs: kubectl -n %s get pods -l app.kubernetes.io/name=torus; kubectl -n %s logs deploy/torus-operator --previous",
			s.Namespace, s.Namespace)
	case s.NeverRan:
		return "install the Torus operator (OperatorHub, or kustomize/); MPI TrainJobs stay without pods until it runs"
	}
	return "ask your cluster admin to run kubectl mpi doctor, or to check the operator's pods"
}

// Check reads the operator's lease. It lists leases cluster-wide, since
// the operator's namespace depends on how it was installed; users who may
// not do that are looked up in DefaultNamespace.
func Check(ctx context.Context, c client.Reader, now time.Time) Status {
	leases, err := find(ctx, c)
	if err != nil {
		return Status{Err: err}
	}
	if len(leases) == 0 {
		return Status{NeverRan: true}
	}
	lease := &leases[0]
	for i := range leases {
		if renewal(&leases[i]).After(renewal(lease)) {
			lease = &leases[i]
		}
	}
	s := Status{
		Known:         true,
		Namespace:     lease.Namespace,
		Holder:        ptr.Deref(lease.Spec.HolderIdentity, ""),
		LastRenewal:   renewal(lease),
		LeaseDuration: defaultLeaseDuration,
	}
	if d := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); d > 0 {
		s.LeaseDuration = time.Duration(d) * time.Second
	}
	if !s.LastRenewal.IsZero() {
		s.Age = now.Sub(s.LastRenewal)
	}
	s.Running = s.Holder != "" && !s.LastRenewal.IsZero() && s.Age <= 2*s.LeaseDuration
	return s
}

// find returns the operator's leases: normally one, more when the operator
// was installed in several namespaces.
func find(ctx context.Context, c client.Reader) ([]coordinationv1.Lease, error) {
	var list coordinationv1.LeaseList
	// Every API server selects by metadata.name; a client that cannot
	// (an error that is no API status, or BadRequest) gets every lease,
	// which is filtered here.
	err := c.List(ctx, &list, client.MatchingFields{"metadata.name": LeaseName})
	var status apierrors.APIStatus
	if err != nil && (apierrors.IsBadRequest(err) || !errors.As(err, &status)) {
		err = c.List(ctx, &list)
	}
	switch {
	case err == nil:
		var out []coordinationv1.Lease
		for _, l := range list.Items {
			if l.Name == LeaseName {
				out = append(out, l)
			}
		}
		return out, nil
	case apierrors.IsForbidden(err):
		// Users usually may not list leases cluster-wide; look where the
		// operator normally runs.
		var l coordinationv1.Lease
		gerr := c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: LeaseName}, &l)
		switch {
		case gerr == nil:
			return []coordinationv1.Lease{l}, nil
		case apierrors.IsNotFound(gerr):
			// It may be in a namespace out of sight: unknown, not absent.
			return nil, fmt.Errorf("reading the operator's lease: %w (and there is none in namespace %s)", err, DefaultNamespace)
		default:
			return nil, fmt.Errorf("reading lease %s/%s: %w", DefaultNamespace, LeaseName, gerr)
		}
	default:
		return nil, fmt.Errorf("listing leases: %w", err)
	}
}

// renewal is when a lease was last renewed (or acquired, for a lease that
// has no renewal yet); zero when never.
func renewal(l *coordinationv1.Lease) time.Time {
	switch {
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time
	}
	return time.Time{}
}
