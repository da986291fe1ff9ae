package statusserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// The webhook whose configuration tells where the operator is served, and
// with which CA: kustomize's Service, with cert-manager's CA or
// OpenShift's service CA injected.
const (
	locatorWebhook = "vtrainjob.torus-mpi.io"
	// WebhookConfiguration is the name kustomize gives Torus's
	// ValidatingWebhookConfiguration.
	WebhookConfiguration = "torus-validating-webhook-configuration"
)

// The ValidatingWebhookConfiguration the API server calls the operator
// through names its Service and CA; the status server is served beside
// the webhooks. Read by name alone.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get,resourceNames=torus-validating-webhook-configuration

// Locator keeps where the pods reach the status server: given (URL and
// CA file), or read from the webhook server's certificate directory (a
// cert-manager Secret's ca.crt) and the operator's webhook configuration,
// and looked at again every refresh, as certificates rotate.
type Locator struct {
	// URL and CAFile, when set, are the server's base URL and the file of
	// the CA that verifies it; either left empty is read from the webhook
	// configuration.
	URL, CAFile string
	// Service, when set and URL is not, is the Service of Namespace the
	// pods reach the server through (a ServiceRef), as OLM names the
	// webhooks' Service; CASecret, when set and CAFile is not, is the
	// Secret key of Namespace holding the CA (a SecretKeyRef), as OLM
	// keeps its webhook CA.
	Service   *ServiceRef
	CASecret  *SecretKeyRef
	Namespace string
	// CertDir is the webhook server's certificate directory, whose ca.crt,
	// where the Secret mounted there has one, verifies the server.
	CertDir string
	Reader  client.Reader
	Log     logr.Logger
	// Refresh is how often the location is read again.
	Refresh time.Duration

	current atomic.Pointer[trainerstatus.Server]
}

// Current is where the pods reach the server, or nil while none is known.
func (l *Locator) Current() *trainerstatus.Server { return l.current.Load() }

// Start reads the location now, then every Refresh, or every
// retryUnknown while none is known, until ctx ends.
func (l *Locator) Start(ctx context.Context) error {
	for {
		next := l.Refresh
		srv, err := l.locate(ctx)
		switch {
		case err != nil && l.current.Load() == nil:
			l.Log.Info("No status server for the jobs' pods yet: they report no progress until one is known", "reason", err.Error())
			next = retryUnknown
		case err != nil:
			l.Log.Info("Keeping the status server's last location", "reason", err.Error())
		default:
			if old := l.current.Swap(srv); old == nil || *old != *srv {
				l.Log.Info("Training pods report progress to the status server", "url", srv.URL)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// retryUnknown is how soon the Locator looks again while it knows no
// location: the webhook configuration is applied with the operator.
const retryUnknown = 10 * time.Second

// NeedLeaderElection is false: every replica serves reports.
func (l *Locator) NeedLeaderElection() bool { return false }

func (l *Locator) locate(ctx context.Context) (*trainerstatus.Server, error) {
	srv := &trainerstatus.Server{URL: l.URL}
	if srv.URL == "" && l.Service != nil {
		srv.URL = fmt.Sprintf("https://%s.%s.svc:%d", l.Service.Name, l.Namespace, l.Service.Port)
	}
	switch {
	case l.CAFile != "":
		ca, err := os.ReadFile(l.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the status server's CA: %w", err)
		}
		srv.CA = string(ca)
	case l.CASecret != nil:
		var secret corev1.Secret
		if err := l.Reader.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.CASecret.Name}, &secret); err != nil {
			return nil, fmt.Errorf("reading the status server's CA from Secret %s/%s: %w", l.Namespace, l.CASecret.Name, err)
		}
		ca := secret.Data[l.CASecret.Key]
		if len(ca) == 0 {
			return nil, fmt.Errorf("the status server's CA Secret %s/%s holds no %s yet", l.Namespace, l.CASecret.Name, l.CASecret.Key)
		}
		srv.CA = string(ca)
	case l.CertDir != "":
		if ca, err := os.ReadFile(filepath.Join(l.CertDir, "ca.crt")); err == nil {
			srv.CA = string(ca)
		}
	}
	if srv.URL == "" || srv.CA == "" {
		url, ca, err := l.fromWebhook(ctx)
		if err != nil {
			return nil, err
		}
		if srv.URL == "" {
			srv.URL = url
		}
		if srv.CA == "" {
			srv.CA = ca
		}
	}
	if len(srv.CA) > trainerstatus.MaxCA {
		return nil, fmt.Errorf("the status server's CA bundle is %d bytes, more than the %d a pod carries", len(srv.CA), trainerstatus.MaxCA)
	}
	return srv, nil
}

// fromWebhook reads the operator's Service and CA from the configuration
// of its TrainJob validation webhook.
func (l *Locator) fromWebhook(ctx context.Context) (url, ca string, err error) {
	var c admissionregistrationv1.ValidatingWebhookConfiguration
	if err := l.Reader.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &c); err != nil {
		return "", "", fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", WebhookConfiguration, err)
	}
	for _, h := range c.Webhooks {
		if h.Name != locatorWebhook {
			continue
		}
		cc := h.ClientConfig
		if len(cc.CABundle) == 0 {
			return "", "", fmt.Errorf("webhook %s of %s has no CA bundle yet", h.Name, c.Name)
		}
		switch {
		case cc.Service != nil:
			port := int32(443)
			if cc.Service.Port != nil {
				port = *cc.Service.Port
			}
			url = fmt.Sprintf("https://%s.%s.svc:%d", cc.Service.Name, cc.Service.Namespace, port)
		case cc.URL != nil:
			// A webhook outside the cluster is reached by its URL: the
			// pods can reach it the same way only where told so
			// (--status-server-url).
			url = strings.TrimSuffix(*cc.URL, "/validate-trainer-kubeflow-org-v1alpha1-trainjob")
		}
		return url, string(cc.CABundle), nil
	}
	return "", "", fmt.Errorf("ValidatingWebhookConfiguration %s holds no webhook %s", WebhookConfiguration, locatorWebhook)
}

// ServiceRef is a Service of the operator's namespace and its port:
// NAME:PORT.
type ServiceRef struct {
	Name string
	Port int
}

// ParseServiceRef reads NAME:PORT.
func ParseServiceRef(s string) (*ServiceRef, error) {
	name, port, ok := strings.Cut(s, ":")
	p, err := strconv.Atoi(port)
	if !ok || err != nil || p < 1 || p > 65535 || len(validation.IsDNS1035Label(name)) > 0 {
		return nil, fmt.Errorf("%q is not a Service and its port: write NAME:PORT, such as torus-operator-service:443", s)
	}
	return &ServiceRef{Name: name, Port: p}, nil
}

// SecretKeyRef is a key of a Secret of the operator's namespace:
// NAME:KEY.
type SecretKeyRef struct {
	Name, Key string
}

// ParseSecretKeyRef reads NAME:KEY.
func ParseSecretKeyRef(s string) (*SecretKeyRef, error) {
	name, key, ok := strings.Cut(s, ":")
	if !ok || len(validation.IsDNS1123Subdomain(name)) > 0 || len(validation.IsConfigMapKey(key)) > 0 {
		return nil, fmt.Errorf("%q is not a Secret and its key: write NAME:KEY, such as torus-operator-service-cert:olmCAKey", s)
	}
	return &SecretKeyRef{Name: name, Key: key}, nil
}
