// Package upstream embeds Kubeflow Trainer's own runtime framework, so that
// Torus, which stands in for the Trainer controller, reconciles and admits
// every TrainJob that is not MPI exactly as Trainer v2.3.0 does: torch,
// jax, xgboost, plainml and flux through upstream's plugins, with its
// coscheduling, Volcano and JobSet plugins, its status model and its
// webhooks. Nothing here re-implements upstream: it builds upstream's
// runtimes, reconciler and webhooks and hands them to Torus's controller and
// webhook server, which route each object to Torus or to upstream.
package upstream

import (
	"context"
	"fmt"
	"net/http"

	configapi "github.com/kubeflow/trainer/v2/pkg/apis/config/v1alpha1"
	trainercontroller "github.com/kubeflow/trainer/v2/pkg/controller"
	jobruntimes "github.com/kubeflow/trainer/v2/pkg/runtime"
	runtimecore "github.com/kubeflow/trainer/v2/pkg/runtime/core"
	trainerwebhooks "github.com/kubeflow/trainer/v2/pkg/webhooks"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// What upstream's plugins read and write beyond what Torus's own controller
// needs: the runtime snapshot ConfigMaps (server-side apply), JobSets by
// server-side apply, the PodGroups of the coscheduling and Volcano plugins,
// and what those plugins read to size a PodGroup.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;update;patch

// Framework is upstream Trainer's runtime framework: its runtimes (one per
// runtime kind, sharing one set of plugins) and its TrainJob reconciler.
type Framework struct {
	runtimes   map[string]jobruntimes.Runtime
	reconciler *trainercontroller.TrainJobReconciler
}

// New builds upstream's runtimes on the manager's client and indexer, with
// upstream's default Configuration. Upstream's TrainJobStatus plugin stays
// off, as it is by default: it points the pods at upstream's own Service
// and certificate Secret. Torus wires the trainer pods of these jobs to its
// own status server, where status says it is (nil: none), with the same
// variables, files and audience, as it wires an MPI job's (statusWiring).
func New(ctx context.Context, mgr ctrl.Manager, status func() *trainerstatus.Server) (*Framework, error) {
	cfg := &configapi.Configuration{}
	configapi.SetDefaults_Configuration(cfg)
	c := frameworkClient{Client: mgr.GetClient(), api: mgr.GetAPIReader(), status: status}
	runtimes, err := runtimecore.New(ctx, c, mgr.GetFieldIndexer(), cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubeflow Trainer's runtime framework: %w", err)
	}
	return &Framework{
		runtimes:   runtimes,
		reconciler: trainercontroller.NewTrainJobReconciler(c, mgr.GetEventRecorder("trainer-trainjob-controller"), runtimes),
	}, nil
}

// Reconcile reconciles one TrainJob as upstream's TrainJob controller does.
func (f *Framework) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return f.reconciler.Reconcile(ctx, req)
}

// Watch adds to a controller the watches upstream's plugins ask for
// (JobSets and PodGroups owned by a TrainJob, LimitRanges, RuntimeClasses),
// as upstream's own controller set-up does.
func (f *Framework) Watch(b *builder.Builder, mgr ctrl.Manager) *builder.Builder {
	for _, rt := range f.runtimes {
		for _, register := range rt.EventHandlerRegistrars() {
			if register != nil {
				b = register(b, mgr.GetClient(), mgr.GetCache())
			}
		}
	}
	return b
}

// Webhooks builds upstream's admission webhooks (TrainJob defaulting and
// validation, runtime validation) with upstream's own set-up, and returns
// them by path instead of serving them: Torus serves one set of webhooks on
// the same paths and hands upstream the objects that are not MPI.
func (f *Framework) Webhooks(mgr ctrl.Manager) (map[string]http.Handler, error) {
	hooks := &hookSet{handlers: map[string]http.Handler{}}
	if kind, err := trainerwebhooks.Setup(hookManager{Manager: mgr, server: hooks}, f.runtimes); err != nil {
		return nil, fmt.Errorf("building Kubeflow Trainer's %s webhook: %w", kind, err)
	}
	return hooks.handlers, nil
}

// hookManager is the manager as upstream's webhook set-up sees it: its
// webhooks are registered into a hookSet rather than served.
type hookManager struct {
	ctrl.Manager
	server *hookSet
}

func (m hookManager) GetWebhookServer() webhook.Server { return m.server }

// hookSet collects the handlers registered with it; it is never started.
type hookSet struct {
	webhook.Server
	handlers map[string]http.Handler
}

func (s *hookSet) Register(path string, h http.Handler) { s.handlers[path] = h }

// WebhookMux is nil: nothing is served, and the builder then registers every
// path it builds.
func (s *hookSet) WebhookMux() *http.ServeMux { return nil }

// frameworkClient is the client upstream's framework works with. It reads
// ConfigMaps from the API server: upstream keeps a snapshot of each job's
// runtime in a ConfigMap (<job>-runtime-snapshot) that Torus's cache,
// which holds only Torus's own labelled ConfigMaps, never sees. Read from
// the cache, every reconcile would find no snapshot and take the runtime
// afresh, which upstream does only once. And it wires the JobSets upstream
// applies to Torus's status server (statusWiring).
type frameworkClient struct {
	client.Client
	api    client.Reader
	status func() *trainerstatus.Server
}

func (c frameworkClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return c.api.Get(ctx, key, obj, opts...)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
