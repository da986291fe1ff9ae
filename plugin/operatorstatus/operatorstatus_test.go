package operatorstatus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/torus-mpi/torus/pkg/scheme"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func lease(ns, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime:            ptr.To(metav1.NewMicroTime(now.Add(-renewedAgo))),
		},
	}
}

//lint:ignore ST1005 the API server's own words
var forbidden = apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New(`User "alice" cannot list resource "leases"`))

// The fake client stands in for reading leases only: which lease exists,
// and whether the user may list or get it.
func TestCheck(t *testing.T) {
	tc := map[string]struct {
		leases []*coordinationv1.Lease
		// index registers metadata.name, the field selector every API
		// server supports; without it the fake client refuses it and
		// Check filters an unselected list.
		index bool
		// forbidList: the user may not list leases cluster-wide;
		// forbidGet: nor get one.
		forbidList, forbidGet bool
		want                  Status
		wantDown              bool
		wantMessage, wantFix  string
		wantErr               bool
	}{
		"fresh lease": {
			leases: []*coordinationv1.Lease{lease("torus-system", "torus-0_abc", 3*time.Second)},
			index:  true,
			want: Status{Known: true, Running: true, Namespace: "torus-system", Holder: "torus-0_abc",
				LastRenewal: now.Add(-3 * time.Second), LeaseDuration: 15 * time.Second, Age: 3 * time.Second},
			wantMessage: "the Torus operator is running (torus-0_abc renewed its lease 3s ago in namespace torus-system)",
		},
		"expired but within twice its duration: fail-over may be under way": {
			leases: []*coordinationv1.Lease{lease("openshift-operators", "torus-0_abc", 30*time.Second)},
			want: Status{Known: true, Running: true, Namespace: "openshift-operators", Holder: "torus-0_abc",
				LastRenewal: now.Add(-30 * time.Second), LeaseDuration: 15 * time.Second, Age: 30 * time.Second},
			wantMessage: "the Torus operator is running (torus-0_abc renewed its lease 30s ago in namespace openshift-operators)",
		},
		"stale lease": {
			leases: []*coordinationv1.Lease{lease("torus-system", "torus-0_abc", 3*time.Minute)},
			index:  true,
			want: Status{Known: true, Namespace: "torus-system", Holder: "torus-0_abc",
				LastRenewal: now.Add(-3 * time.Minute), LeaseDuration: 15 * time.Second, Age: 3 * time.Minute},
			wantDown:    true,
			wantMessage: "the Torus operator is not running (last lease renewal 3m ago in namespace torus-system)",
			wantFix:     "check its pods and logs: kubectl -n torus-system get pods -l app.kubernetes.io/name=torus; kubectl -n torus-system logs deploy/torus-operator --previous",
		},
		"no holder": {
			leases: []*coordinationv1.Lease{lease("torus-system", "", time.Second)},
			want: Status{Known: true, Namespace: "torus-system",
				LastRenewal: now.Add(-time.Second), LeaseDuration: 15 * time.Second, Age: time.Second},
			wantDown:    true,
			wantMessage: "the Torus operator is not running (no replica holds its lease; last lease renewal 1s ago in namespace torus-system)",
			wantFix:     "check its pods and logs: kubectl -n torus-system get pods -l app.kubernetes.io/name=torus; kubectl -n torus-system logs deploy/torus-operator --previous",
		},
		"the freshest of two installs counts": {
			leases: []*coordinationv1.Lease{lease("torus-system", "old_1", time.Hour), lease("operators", "new_2", 2*time.Second)},
			index:  true,
			want: Status{Known: true, Running: true, Namespace: "operators", Holder: "new_2",
				LastRenewal: now.Add(-2 * time.Second), LeaseDuration: 15 * time.Second, Age: 2 * time.Second},
			wantMessage: "the Torus operator is running (new_2 renewed its lease 2s ago in namespace operators)",
		},
		"no lease anywhere": {
			index:       true,
			want:        Status{NeverRan: true},
			wantMessage: "no Torus operator has ever run in this cluster (no leader lease torus-operator.torus-mpi.io)",
			wantFix:     "install the Torus operator (OperatorHub, or kustomize/); MPI TrainJobs stay without pods until it runs",
		},
		"may not list, reads torus-system": {
			leases:     []*coordinationv1.Lease{lease("torus-system", "torus-0_abc", 3*time.Minute)},
			forbidList: true,
			want: Status{Known: true, Namespace: "torus-system", Holder: "torus-0_abc",
				LastRenewal: now.Add(-3 * time.Minute), LeaseDuration: 15 * time.Second, Age: 3 * time.Minute},
			wantDown:    true,
			wantMessage: "the Torus operator is not running (last lease renewal 3m ago in namespace torus-system)",
			wantFix:     "check its pods and logs: kubectl -n torus-system get pods -l app.kubernetes.io/name=torus; kubectl -n torus-system logs deploy/torus-operator --previous",
		},
		"may not list, none in torus-system: it may be elsewhere": {
			leases:     []*coordinationv1.Lease{lease("openshift-operators", "torus-0_abc", 3*time.Minute)},
			forbidList: true,
			wantErr:    true,
			wantFix:    "ask your cluster admin to run kubectl mpi doctor, or to check the operator's pods",
		},
		"forbidden everywhere": {
			leases:     []*coordinationv1.Lease{lease("torus-system", "torus-0_abc", 3*time.Minute)},
			forbidList: true, forbidGet: true,
			wantErr: true,
			wantFix: "ask your cluster admin to run kubectl mpi doctor, or to check the operator's pods",
		},
	}
	for name, tc := range tc {
		t.Run(name, func(t *testing.T) {
			b := ctrlfake.NewClientBuilder().WithScheme(scheme.New())
			for _, l := range tc.leases {
				b = b.WithObjects(l)
			}
			if tc.index {
				b = b.WithIndex(&coordinationv1.Lease{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} })
			}
			b = b.WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.forbidList {
						return forbidden
					}
					return c.List(ctx, list, opts...)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if tc.forbidGet {
						return forbidden
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			got := Check(context.Background(), b.Build(), now)
			if gotErr := got.Err != nil; gotErr != tc.wantErr {
				t.Errorf("Err = %v, want an error: %v", got.Err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Status{}, "Err")); diff != "" {
				t.Errorf("Check (-want,+got):\n%s", diff)
			}
			if got.Down() != tc.wantDown {
				t.Errorf("Down() = %v, want %v", got.Down(), tc.wantDown)
			}
			if tc.wantMessage != "" {
				if diff := cmp.Diff(tc.wantMessage, got.Message()); diff != "" {
					t.Errorf("Message (-want,+got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantFix, got.Fix()); diff != "" {
				t.Errorf("Fix (-want,+got):\n%s", diff)
			}
		})
	}
}
