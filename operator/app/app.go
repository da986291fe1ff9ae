// Package app assembles the Torus operator: flags, the controller manager,
// controllers, webhooks, probes and metrics.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/operator/console"
	"github.com/torus-mpi/torus/operator/controller"
	"github.com/torus-mpi/torus/operator/metricsauth"
	"github.com/torus-mpi/torus/operator/monitoring"
	"github.com/torus-mpi/torus/operator/runtimes"
	"github.com/torus-mpi/torus/operator/startup"
	"github.com/torus-mpi/torus/operator/statusserver"
	"github.com/torus-mpi/torus/operator/upstream"
	toruswebhook "github.com/torus-mpi/torus/operator/webhook"
	"github.com/torus-mpi/torus/pkg/scheme"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
	"github.com/torus-mpi/torus/pkg/version"
	"github.com/torus-mpi/torus/samples"
)

// Options are the operator's command-line settings.
type Options struct {
	MetricsAddr      string
	MetricsSecure    bool
	ProbeAddr        string
	LeaderElect      bool
	LeaderElectionNS string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader's lease
	// as kube-controller-manager's flags of those names do.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Namespace is the operator's, where it keeps its proof key.
	Namespace      string
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	EnableWebhooks bool
	// QPS and Burst size the client for hundreds of jobs: each job costs a
	// handful of writes, and client-go's default of 5 QPS would queue them
	// for minutes.
	QPS   float32
	Burst int
	// Settings are those of the jobs the operator runs, with their own
	// flags.
	controller.Settings
	// PprofAddr serves net/http/pprof, for finding hot spots under load
	// (test/perf/controlplane); off by default.
	PprofAddr string
	// InstallDefaultRuntimes applies the default MPI runtimes at start;
	// DefaultRuntimesUser says which UID they fix (runtimes.UserMode).
	InstallDefaultRuntimes bool
	DefaultRuntimesUser    string
	// InstallMonitoring applies a ServiceMonitor and the alerts where the
	// Prometheus Operator's API is served.
	InstallMonitoring bool
	// StatusServerURL and StatusServerCAFile say where the training pods
	// reach the status server and which CA verifies it; empty, both are
	// read from the operator's webhook configuration.
	StatusServerURL    string
	StatusServerCAFile string
	// StatusServerService (NAME:PORT) and StatusServerCASecret
	// (NAME:KEY) name the Service and the Secret key of the operator's
	// namespace that give them instead, as an OLM install has them.
	StatusServerService  string
	StatusServerCASecret string
	// StatusWriteInterval is the least time between two writes of a job's
	// progress.
	StatusWriteInterval time.Duration
	Zap                 zap.Options
}

// AddFlags binds the options to a flag set.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint; \"0\" disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, to clients allowed by TokenReview and SubjectAccessReview.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "Address of the pprof endpoints (/debug/pprof/); empty disables them.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election lease (default: the pod's namespace).")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a replica waits after the leader's last renewal before it takes the lease.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew its lease before it stops; shorter than the lease duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "How long replicas wait between tries to take or renew the lease.")
	fs.StringVar(&o.Namespace, "namespace", "", "The operator's namespace, where it keeps the key by which it recognises the children it made (Secret "+ProofKeySecret+"; default: the pod's namespace, else --leader-election-namespace).")
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "Address the admission webhook server listens on (default: all of the pod's).")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port of the admission webhook server.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "Directory holding tls.crt and tls.key for the webhook server (default: controller-runtime's).")
	fs.BoolVar(&o.EnableWebhooks, "enable-webhooks", true, "Serve the admission webhooks.")
	fs.Float32Var(&o.QPS, "kube-api-qps", 500, "Sustained requests per second to the API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", 1000, "Burst of requests to the API server.")
	o.Settings.AddFlags(fs)
	fs.BoolVar(&o.InstallDefaultRuntimes, "install-default-runtimes", true,
		"Install the default MPI ClusterTrainingRuntimes ("+strings.Join(samples.RuntimeNames(), ", ")+") at start; fields an administrator changed are kept.")
	fs.BoolVar(&o.InstallMonitoring, "install-monitoring", true,
		"Apply a ServiceMonitor for the metrics Service and the PrometheusRule of the operator's alerts to its namespace, where the Prometheus Operator's API (monitoring.coreos.com) is served.")
	fs.StringVar(&o.DefaultRuntimesUser, "default-runtimes-user", string(runtimes.UserAuto),
		"UID the default runtimes fix: auto (uid 1000 unless the cluster has OpenShift SCCs, which assign one), platform (none) or image (uid 1000).")
	fs.StringVar(&o.StatusServerURL, "status-server-url", "",
		"Base URL (https://host:port) at which training pods reach the TrainJob status endpoint this operator serves beside its webhooks (default: the webhooks' Service, as ValidatingWebhookConfiguration "+statusserver.WebhookConfiguration+" names it).")
	fs.StringVar(&o.StatusServerCAFile, "status-server-ca-file", "",
		"PEM file of the CA that verifies the status endpoint for training pods (default: ca.crt in --webhook-cert-dir, else the caBundle of ValidatingWebhookConfiguration "+statusserver.WebhookConfiguration+").")
	fs.StringVar(&o.StatusServerService, "status-server-service", "",
		"NAME:PORT of the Service of the operator's namespace through which training pods reach the status endpoint, where --status-server-url is not given (OLM: <deployment>-service:443).")
	fs.StringVar(&o.StatusServerCASecret, "status-server-ca-secret", "",
		"NAME:KEY of the Secret of the operator's namespace holding the CA of the status endpoint, where --status-server-ca-file is not given (OLM: <deployment>-service-cert:olmCAKey).")
	fs.DurationVar(&o.StatusWriteInterval, "status-write-interval", statusserver.DefaultOptions().WriteInterval,
		"Least time between two writes of one TrainJob's reported progress to the API server, whatever its pods send.")
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Zap.BindFlags(zfs)
	fs.AddGoFlagSet(zfs)
}

// Leader election takes a Lease in the operator's own namespace only (a Role,
// not the ClusterRole; OLM and kustomize place it in the install namespace):
// client-go's lease lock gets, creates and updates it, nothing more.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=torus-system
// controller-runtime's leader election records its transitions as core/v1
// Events on that Lease, in the same namespace (the reconciler's own events
// go through events.k8s.io, cluster-wide).
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=torus-system
// The authenticated metrics endpoint.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// NewManager builds a manager with Torus's controllers and webhooks.
func NewManager(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.UserAgent = "torus-operator"

	metricsOpts := metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: o.MetricsSecure}
	if o.MetricsSecure {
		metricsOpts.FilterProvider = metricsauth.FilterProvider
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "torus-operator.torus-mpi.io",
		LeaderElectionNamespace: o.LeaderElectionNS,
		LeaseDuration:           &o.LeaseDuration,
		RenewDeadline:           &o.RenewDeadline,
		RetryPeriod:             &o.RetryPeriod,
		Cache:                   controller.CacheOptions(),
		PprofBindAddress:        o.PprofAddr,
	}
	if o.EnableWebhooks {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir})
	}
	if err := o.Settings.Validate(); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	// The TrainJob status endpoint, served beside the webhooks: where the
	// pods reach it is known once the webhooks' configuration is.
	var statusServer func() *trainerstatus.Server
	if o.EnableWebhooks {
		if o.StatusWriteInterval <= 0 {
			return nil, fmt.Errorf("--status-write-interval must be positive, got %s", o.StatusWriteInterval)
		}
		certDir := o.WebhookCertDir
		if certDir == "" {
			certDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
		}
		locator := &statusserver.Locator{URL: o.StatusServerURL, CAFile: o.StatusServerCAFile, CertDir: certDir, Reader: mgr.GetAPIReader(),
			Log: ctrl.Log.WithName("status-server"), Refresh: 5 * time.Minute}
		if o.StatusServerService != "" || o.StatusServerCASecret != "" {
			if locator.Namespace = o.namespace(); locator.Namespace == "" {
				return nil, fmt.Errorf("--status-server-service and --status-server-ca-secret name objects of the operator's namespace: give it with --namespace outside a pod")
			}
		}
		if o.StatusServerService != "" {
			if locator.Service, err = statusserver.ParseServiceRef(o.StatusServerService); err != nil {
				return nil, fmt.Errorf("--status-server-service: %w", err)
			}
		}
		if o.StatusServerCASecret != "" {
			if locator.CASecret, err = statusserver.ParseSecretKeyRef(o.StatusServerCASecret); err != nil {
				return nil, fmt.Errorf("--status-server-ca-secret: %w", err)
			}
		}
		if err := mgr.Add(locator); err != nil {
			return nil, fmt.Errorf("adding the status server's locator: %w", err)
		}
		statusServer = locator.Current
		statusOpts := statusserver.DefaultOptions()
		statusOpts.WriteInterval = o.StatusWriteInterval
		mgr.GetWebhookServer().Register(trainerstatus.Pattern, statusserver.New(mgr.GetClient(), mgr.GetClient(), mgr.GetAPIReader(), statusOpts, ctrl.Log.WithName("status-server")))
	}
	// Upstream Trainer's runtimes, reconciler and webhooks for every
	// TrainJob that is not MPI: Torus replaces the Trainer controller.
	others, err := upstream.New(context.Background(), mgr, statusServer)
	if err != nil {
		return nil, err
	}
	setupControllers := func() error {
		var proofKeys controller.ProofKeys
		ns := o.namespace()
		if ns != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if proofKeys, err = loadProofKeys(ctx, mgr.GetClient(), mgr.GetAPIReader(), ns); err != nil {
				return err
			}
		} else {
			ctrl.Log.WithName("setup").Info("No namespace known (not in a pod; neither --namespace nor --leader-election-namespace): the children this process makes are recognised by it alone", "secret", ProofKeySecret)
		}
		settings := o.Settings
		if settings.LaunchImage == "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			settings.LaunchImage = ownImage(ctx, mgr.GetAPIReader(), ns)
		}
		return controller.SetupControllers(mgr, controller.Options{Settings: settings, ProofKeys: proofKeys, Upstream: others, StatusServer: statusServer, Webhooks: o.EnableWebhooks})
	}
	// Without JobSet's API the controllers cannot watch JobSets, but the
	// webhooks, on which every TrainJob write in the cluster depends, must
	// serve: the controllers start once it is installed.
	controllers := &startup.Gate{}
	jobSet := jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet")
	if served, err := startup.Served(mgr.GetRESTMapper(), jobSet.GroupKind(), jobSet.Version); err != nil {
		return nil, err
	} else if served {
		if err := setupControllers(); err != nil {
			return nil, err
		}
	} else {
		log := ctrl.Log.WithName("setup")
		log.Info("JobSet's API is not served: the webhooks serve, the controllers start once JobSet is installed", "kind", jobSet.String())
		if err := mgr.Add(startup.WhenServed(mgr.GetRESTMapper(), jobSet, apiPollInterval, controllers, log,
			func(context.Context) error { return setupControllers() })); err != nil {
			return nil, fmt.Errorf("adding the controllers' start: %w", err)
		}
	}
	if err := mgr.AddReadyzCheck("controllers", controllers.Check); err != nil {
		return nil, fmt.Errorf("adding readiness check: %w", err)
	}
	if o.InstallDefaultRuntimes {
		installer := &runtimes.Installer{Client: mgr.GetClient(), Mapper: mgr.GetRESTMapper(),
			User: runtimes.UserMode(o.DefaultRuntimesUser), Log: ctrl.Log.WithName("runtimes")}
		if err := installer.Validate(); err != nil {
			return nil, fmt.Errorf("--default-runtimes-user: %w", err)
		}
		if err := mgr.Add(installer.Runnable()); err != nil {
			return nil, fmt.Errorf("adding the default runtimes installer: %w", err)
		}
	}
	// OpenShift's console: TrainJob samples and the plugin's downloads
	// (nothing where the console's API is not served).
	consoleInstaller := console.Installer(mgr.GetClient(), mgr.GetRESTMapper(), version.Version, ctrl.Log.WithName("console"))
	if err := mgr.Add(consoleInstaller.Runnable()); err != nil {
		return nil, fmt.Errorf("adding the console installer: %w", err)
	}
	if o.InstallMonitoring {
		if ns, ok := podNamespace(); ok {
			monitor := monitoring.Installer(mgr.GetClient(), mgr.GetRESTMapper(), ns, ctrl.Log.WithName("monitoring"))
			if err := mgr.Add(monitor.Runnable()); err != nil {
				return nil, fmt.Errorf("adding the monitoring installer: %w", err)
			}
		} else {
			ctrl.Log.WithName("monitoring").Info("Not in a pod (no namespace known): no ServiceMonitor or alerts")
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if o.EnableWebhooks {
		hooks, err := others.Webhooks(mgr)
		if err != nil {
			return nil, err
		}
		if err := toruswebhook.SetupWebhooks(mgr, o.MaxNodes, hooks); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, fmt.Errorf("adding readiness check: %w", err)
		}
	} else if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding readiness check: %w", err)
	}
	return mgr, nil
}

// apiPollInterval is how often the operator looks whether an API it waits
// for is served.
const apiPollInterval = 10 * time.Second

// podNamespace is the namespace the operator's pod runs in: its
// ServiceAccount's, as mounted, else $POD_NAMESPACE.
// namespace is the operator's own namespace: --namespace, else its pod's,
// else its leader-election lease's; "" when none is known.
func (o *Options) namespace() string {
	if o.Namespace != "" {
		return o.Namespace
	}
	if ns, ok := podNamespace(); ok {
		return ns
	}
	return o.LeaderElectionNS
}

func podNamespace() (string, bool) {
	if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(data) > 0 {
		return strings.TrimSpace(string(data)), true
	}
	ns := os.Getenv("POD_NAMESPACE")
	return ns, ns != ""
}

// Run starts the operator and blocks until ctx ends.
func Run(ctx context.Context, o Options) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := newManagerRetrying(ctx, cfg, o)
	if err != nil {
		return err
	}
	if err := retryAPI(ctx, startupBackoff, func() error { return CheckNoUpstreamTrainer(ctx, mgr.GetAPIReader()) }); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Starting Torus operator")
	return mgr.Start(ctx)
}

// startupBackoff bounds the start-up retries: about a minute in all.
var startupBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 8, Cap: 10 * time.Second}

// newManagerRetrying builds the manager, trying again while the API server
// answers its first requests (discovery) with an error or not at all.
func newManagerRetrying(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	var mgr ctrl.Manager
	err := retryAPI(ctx, startupBackoff, func() error {
		var err error
		mgr, err = NewManager(cfg, o)
		return err
	})
	return mgr, err
}

// retryAPI calls fn until it succeeds, fails otherwise than by the API
// server's answer (a bad setting, upstream's controller installed), or
// the back-off runs out, which returns the last answer: one lost answer at
// start-up must not take down the webhooks every TrainJob write goes
// through until the kubelet's restart back-off lets the pod try again.
func retryAPI(ctx context.Context, backoff wait.Backoff, fn func() error) error {
	log := ctrl.Log.WithName("setup")
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		err := fn()
		if err == nil {
			return true, nil
		}
		if !fromAPIServer(err) {
			return false, err
		}
		last = err
		log.Info("The API server failed a start-up request; trying again", "error", err.Error())
		return false, nil
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

// fromAPIServer reports whether err is an answer of the API server, or the
// lack of one, rather than a bad setting.
func fromAPIServer(err error) bool {
	var status apierrors.APIStatus
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &status) || errors.As(err, &urlErr) || errors.As(err, &netErr)
}
