package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadutils "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/utils"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	torusv1alpha1 "github.com/torus-mpi/torus/api/v1alpha1"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainjob"
)

// networkStatusGracePeriod is how long a running pod may go without a
// Multus network-status before it counts as missing its networks.
const networkStatusGracePeriod = 30 * time.Second

// +kubebuilder:rbac:groups=torus-mpi.io,resources=mpinetworkprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=torus-mpi.io,resources=mpinetworkprofiles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// planNetwork resolves the profile a job selects (on the TrainJob, else on
// its runtime). It returns nil without a profile; problems keep the job from
// starting.
func (r *TrainJobReconciler) planNetwork(ctx context.Context, s *scope, rt *mpi.Runtime) (*mpi.NetworkPlan, []string, error) {
	name := mpi.ProfileName(s.tj.Annotations, rt.Annotations)
	if name == "" {
		return nil, nil, nil
	}
	var profile torusv1alpha1.MPINetworkProfile
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, &profile); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, []string{fmt.Sprintf("MPINetworkProfile %q does not exist: create it, or fix the %s annotation (kubectl get mpinetworkprofiles lists them)", name, api.AnnotationNetworkProfile)}, nil
		}
		return nil, nil, fmt.Errorf("getting MPINetworkProfile %s: %w", name, err)
	}
	if profile.Spec.NamespaceSelector != nil {
		// The webhook refuses such jobs; one that got past it (the webhook
		// bypassed, or the namespace relabelled since) does not start.
		var ns corev1.Namespace
		if err := r.client.Get(ctx, client.ObjectKey{Name: s.tj.Namespace}, &ns); err != nil {
			return nil, nil, fmt.Errorf("getting namespace %s: %w", s.tj.Namespace, err)
		}
		refusal, err := mpi.ProfileRefusal(&profile, &ns)
		if err != nil {
			return nil, nil, err
		}
		if refusal != "" {
			return nil, []string{refusal}, nil
		}
	}
	plan, problems, err := mpi.PlanNetworks(&profile, s.tj.Namespace, s.job.Implementation, r.nadGetter(ctx))
	if err != nil {
		if meta.IsNoMatchError(err) || meta.IsNoMatchError(unwrapAll(err)) {
			return nil, []string{"the NetworkAttachmentDefinition API (k8s.cni.cncf.io) is not served: install Multus to use MPINetworkProfile " + name}, nil
		}
		return nil, nil, err
	}
	if len(problems) == 0 {
		p, err := r.nodeProblems(ctx, plan)
		if err != nil {
			return nil, nil, err
		}
		problems = p
	}
	return plan, problems, nil
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func (r *TrainJobReconciler) nadGetter(ctx context.Context) mpi.NADGetter {
	return func(namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
		var nad nadv1.NetworkAttachmentDefinition
		err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &nad)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &nad, nil
	}
}

// nodeLister lists the cached nodes for the JobSet's build
// (children.BuildOptions.Nodes); an error lists none, which settles an
// auto delivery on the init container that any node runs.
func (r *TrainJobReconciler) nodeLister(ctx context.Context) func() []corev1.Node {
	return func() []corev1.Node {
		nodes, err := r.cachedNodes(ctx)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing nodes; the launch agent comes by init container")
		}
		return nodes
	}
}

// cachedNodes are the cache's nodes, shared with it: read only.
func (r *TrainJobReconciler) cachedNodes(ctx context.Context) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return nodes.Items, nil
}

// nodeProblems checks that some node offers each device resource the plan
// requests.
func (r *TrainJobReconciler) nodeProblems(ctx context.Context, plan *mpi.NetworkPlan) ([]string, error) {
	if len(plan.Resources()) == 0 {
		return nil, nil
	}
	nodes, err := r.cachedNodes(ctx)
	if err != nil {
		return nil, err
	}
	return mpi.NodeProblems(plan, nodes), nil
}

// checkAttachments compares what Multus reports on each running rank pod
// with the plan. It returns the pods missing something, and whether some
// pods have not reported yet.
func checkAttachments(plan *mpi.NetworkPlan, job *mpi.Job, pods []corev1.Pod, now time.Time) (missing []string, attached int, pending bool) {
	for i := range pods {
		p := &pods[i]
		role := p.Labels[api.LabelRole]
		if !plan.AllPods && role == api.RoleLauncher && !job.LauncherRunsRanks {
			continue
		}
		if p.Status.Phase != corev1.PodRunning || !p.DeletionTimestamp.IsZero() {
			continue
		}
		host := hostName(p)
		statuses, err := nadutils.GetNetworkStatus(p)
		if err != nil {
			if p.Status.StartTime != nil && now.Sub(p.Status.StartTime.Time) > networkStatusGracePeriod {
				missing = append(missing, fmt.Sprintf("%s (pod %s): Multus reported no %s; is Multus installed and the pod's network annotation honoured?", host, p.Name, mpi.MultusNetworkStatus))
			} else {
				pending = true
			}
			continue
		}
		var lacks []string
		for _, n := range plan.Networks {
			st := findStatus(statuses, n.StatusName())
			switch {
			case st == nil:
				lacks = append(lacks, "no interface from "+n.StatusName())
			case n.Interface != "" && st.Interface != n.Interface:
				lacks = append(lacks, fmt.Sprintf("interface %q from %s, expected %q", st.Interface, n.StatusName(), n.Interface))
			case n.RDMA && (st.DeviceInfo == nil || st.DeviceInfo.Pci == nil || st.DeviceInfo.Pci.RdmaDevice == ""):
				lacks = append(lacks, fmt.Sprintf("no RDMA device on %s from %s", st.Interface, n.StatusName()))
			}
		}
		if len(lacks) > 0 {
			missing = append(missing, fmt.Sprintf("%s (pod %s): %s", host, p.Name, strings.Join(lacks, ", ")))
		} else {
			attached++
		}
	}
	return missing, attached, pending
}

func findStatus(statuses []nadv1.NetworkStatus, name string) *nadv1.NetworkStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

func hostName(p *corev1.Pod) string {
	if p.Labels[api.LabelRole] == api.RoleLauncher {
		return api.RoleLauncher
	}
	return api.RoleWorker + "-" + p.Labels["batch.kubernetes.io/job-completion-index"]
}

// syncNetworks sets NetworksReady from the pods, and fails a job whose pods
// lack interfaces when the profile says so (MPI would hang in MPI_Init).
// It returns true when it failed the job.
func (r *TrainJobReconciler) syncNetworks(ctx context.Context, s *scope) (bool, error) {
	plan := s.job.Network
	if plan == nil || s.jobSet == nil {
		return false, nil
	}
	missing, attached, pending := checkAttachments(plan, s.job, s.pods, s.now)
	switch {
	case len(missing) > 0:
		msg := fmt.Sprintf("Pods lack the networks of MPINetworkProfile %s: %s", plan.Profile, strings.Join(missing, "; "))
		if s.setCondition(trainjob.ConditionNetworksReady, metav1.ConditionFalse, trainjob.ReasonInterfacesMissing, msg) {
			s.event(corev1.EventTypeWarning, trainjob.ReasonNetworkNotReady, "%s", msg)
		}
		if !plan.FailOnMissing {
			return false, nil
		}
		fail := msg + "; the job was stopped rather than left to hang in MPI_Init (set failOnMissingNetworks: false in the profile to keep it)"
		s.stopRunning(trainjob.ReasonNetworkNotReady, fail)
		if s.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainjob.ReasonNetworkNotReady, fail) {
			r.metrics.failed(s.tj, trainjob.ReasonNetworkNotReady, s.now)
		}
		// The JobSet goes once the failure is saved (finish).
		return true, nil
	case attached > 0 && !pending && attached >= rankPods(plan, s.job):
		names := make([]string, 0, len(plan.Networks))
		for _, n := range plan.Networks {
			names = append(names, n.StatusName())
		}
		if s.setCondition(trainjob.ConditionNetworksReady, metav1.ConditionTrue, trainjob.ReasonNetworksAttached,
			fmt.Sprintf("All %d pods have the networks of MPINetworkProfile %s (%s)", attached, plan.Profile, strings.Join(names, ", "))) {
			s.event(corev1.EventTypeNormal, trainjob.ReasonNetworksAttached, "All %d pods have their networks", attached)
		}
	default:
		msg := fmt.Sprintf("Waiting for Multus to report the networks of %d pods", rankPods(plan, s.job)-attached)
		if needs := mpi.PodSecurityNeeds(plan.Capabilities); needs != "" {
			// Pods the namespace's policy refuses are never created.
			msg += "; " + needs
		}
		s.setCondition(trainjob.ConditionNetworksReady, metav1.ConditionFalse, trainjob.ReasonNetworksPending, msg)
	}
	return false, nil
}

// rankPods is how many pods must get the networks.
func rankPods(plan *mpi.NetworkPlan, job *mpi.Job) int {
	n := int(job.Workers)
	if plan.AllPods || job.LauncherRunsRanks {
		n++
	}
	return n
}
