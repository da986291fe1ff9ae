package controller

import (
	"context"
	"fmt"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// ProfileReconciler reports on each MPINetworkProfile whether its
// NetworkAttachmentDefinitions exist and name a device resource.
type ProfileReconciler struct {
	client client.Client
}

// Reconcile implements reconcile.Reconciler.
func (r *ProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p torusv1alpha1.MPINetworkProfile
	if err := r.client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	status := *p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	status.Networks = nil
	var problems []string
	for _, n := range p.Spec.Networks {
		ns := n.Namespace
		st := torusv1alpha1.NetworkAttachmentStatus{Name: n.Name, Namespace: n.Namespace, ResourceName: n.ResourceName}
		if n.Namespace == "" {
			// Found in each job's own namespace; checked when a job starts.
			if st.ResourceName == "" {
				st.ResourceName = "(from the NetworkAttachmentDefinition in each job's namespace)"
			}
			status.Networks = append(status.Networks, st)
			continue
		}
		var nad nadv1.NetworkAttachmentDefinition
		err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n.Name}, &nad)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			st.Problem = fmt.Sprintf("NetworkAttachmentDefinition %s/%s does not exist", ns, n.Name)
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("getting NetworkAttachmentDefinition %s/%s: %w", ns, n.Name, err)
		case st.ResourceName == "":
			st.ResourceName = nad.Annotations[mpi.NADResourceName]
			if st.ResourceName == "" {
				st.Problem = fmt.Sprintf("it has no %s annotation: set resourceName in the profile", mpi.NADResourceName)
			}
		}
		if st.Problem != "" {
			problems = append(problems, n.Name+": "+st.Problem)
		}
		status.Networks = append(status.Networks, st)
	}
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "NetworksFound",
		Message: "Every NetworkAttachmentDefinition exists and names a device resource", ObservedGeneration: p.Generation}
	if len(problems) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, trainjob.ReasonNetworkNotReady, strings.Join(problems, "; ")
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	if equality.Semantic.DeepEqual(p.Status, status) {
		return ctrl.Result{}, nil
	}
	orig := p.DeepCopy()
	p.Status = status
	if err := r.client.Status().Patch(ctx, &p, client.MergeFrom(orig)); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating MPINetworkProfile status: %w", err)
	}
	return ctrl.Result{}, nil
}

// setupProfileController watches profiles, and NADs when Multus's API is
// served (a NAD appearing makes its profiles Ready).
func setupProfileController(mgr ctrl.Manager, nadServed bool) error {
	r := &ProfileReconciler{client: mgr.GetClient()}
	allProfiles := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list torusv1alpha1.MPINetworkProfileList
		if err := r.client.List(ctx, &list); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("mpinetworkprofile").For(&torusv1alpha1.MPINetworkProfile{})
	if nadServed {
		b = b.Watches(&nadv1.NetworkAttachmentDefinition{}, allProfiles)
	}
	c, err := b.Build(r)
	if err != nil || nadServed {
		return err
	}
	// Multus installed after the operator started: watch its
	// NetworkAttachmentDefinitions from then on. Their initial list checks
	// every profile again (those made before say the NADs are missing).
	nads := nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinition")
	return mgr.Add(startup.WhenServed(mgr.GetRESTMapper(), nads, optionalAPIPollInterval, nil, mgr.GetLogger().WithName("multus"), func(context.Context) error {
		if err := c.Watch(source.Kind[client.Object](mgr.GetCache(), &nadv1.NetworkAttachmentDefinition{}, allProfiles)); err != nil {
			return fmt.Errorf("watching NetworkAttachmentDefinitions: %w", err)
		}
		return nil
	}))
}
