package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/hack/manifests/render"
	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/test/localcluster/controlplane"
)

const fieldOwner = client.FieldOwner("torus-local-cluster")

func (c *cluster) apply(ctx context.Context, o *unstructured.Unstructured) error {
	return c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership)
}

func (c *cluster) waitEstablished(ctx context.Context, names []string) error {
	return c.waitFor(ctx, "kube-apiserver", 60*time.Second, func(ctx context.Context) error {
		return controlplane.CRDsEstablished(ctx, c.client, names)
	})
}

func (c *cluster) ensureNamespace(ctx context.Context, name string) error {
	err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// installWebhooks registers a component's webhook configurations from its
// module, pointed at its server on 127.0.0.1.
func (c *cluster) installWebhooks(ctx context.Context, component string, port int, module, file string) error {
	dir, err := moduleDir(module)
	if err != nil {
		return err
	}
	return c.installWebhooksFile(ctx, component, loopback, port, filepath.Join(dir, file))
}

// loopback is the address the components' webhooks listen on.
const loopback = "127.0.0.1"

// installWebhooksFile names the webhook configurations of a file after the
// component, so that components do not overwrite each other's, and
// installs them (installWebhookObjects).
func (c *cluster) installWebhooksFile(ctx context.Context, component, host string, port int, path string) error {
	objs, err := repo.ReadObjects(path)
	if err != nil {
		return err
	}
	for _, o := range objs {
		o.SetName(component + "-" + o.GetName())
	}
	return c.installWebhookObjects(ctx, host, port, objs)
}

// installTorusWebhooks installs Torus's webhook configurations as the
// kustomize base renders them (named, and with the selectors it adds), each
// webhook's service reference rewritten into a URL on host:port.
func (c *cluster) installTorusWebhooks(ctx context.Context, host string, port int) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	objs, err := render.Objects(render.Path(root, render.Base))
	if err != nil {
		return err
	}
	return c.installWebhookObjects(ctx, host, port, objs)
}

// installWebhookObjects applies the webhook configurations among objs, each
// webhook's service reference rewritten into a URL on host:port with the
// local CA.
func (c *cluster) installWebhookObjects(ctx context.Context, host string, port int, objs []*unstructured.Unstructured) error {
	ca, err := os.ReadFile(c.ca.CAFile)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if !strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for i := range hooks {
			h := hooks[i].(map[string]any)
			svcPath, _, _ := unstructured.NestedString(h, "clientConfig", "service", "path")
			h["clientConfig"] = map[string]any{
				"url":      fmt.Sprintf("https://%s%s", net.JoinHostPort(host, strconv.Itoa(port)), svcPath),
				"caBundle": base64.StdEncoding.EncodeToString(ca),
			}
			hooks[i] = h
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return err
		}
		if err := c.apply(ctx, o); err != nil {
			return fmt.Errorf("%s: %w", o.GetName(), err)
		}
	}
	return nil
}

// moduleDir finds a module of the main module's build list, or of the
// helper module in hack/testbin/<helper> when one is given (kwok is only
// there).
func moduleDir(module string, helper ...string) (string, error) {
	if len(helper) == 0 {
		return repo.ModuleDir(module, "")
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	return repo.ModuleDir(module, filepath.Join(root, "hack", "testbin", helper[0]))
}
