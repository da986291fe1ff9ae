package framework

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// NewNamespace creates a namespace with a generated name and its default
// ServiceAccount (no controller-manager runs to make it).
func (f *Framework) NewNamespace(ctx ginkgo.SpecContext, prefix string) *corev1.Namespace {
	ginkgo.GinkgoHelper()
	return f.NewLabelledNamespace(ctx, prefix, nil)
}

// NewLabelledNamespace is NewNamespace with labels from its creation on.
// Admission reads a namespace's labels (PodSecurity's enforce level) from
// its informer's cache, which may not yet hold a label added by a later
// update, so a label the test depends on is set in the create.
func (f *Framework) NewLabelledNamespace(ctx ginkgo.SpecContext, prefix string, labels map[string]string) *corev1.Namespace {
	ginkgo.GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	gomega.Expect(f.Client.Create(ctx, ns)).To(gomega.Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	gomega.Expect(f.Client.Create(ctx, sa)).To(gomega.Succeed())
	return ns
}

// ReadObjects decodes every document of a YAML file.
func ReadObjects(path string) []*unstructured.Unstructured {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(path)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			break
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}

// DecodeFile reads a single-document YAML file into a typed object.
func DecodeFile(path string, into client.Object) {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(path)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(yaml.UnmarshalStrict(data, into)).To(gomega.Succeed(), "decoding %s", filepath.Base(path))
}

// ports hands out loopback ports outside the kernel's ephemeral range: a
// port found by listening on :0 can be taken by any outgoing connection
// before the server it is for binds it.
var ports = sync.OnceValues(supervisor.NewPorts)

// FreePort is a loopback port nothing listens on and that no outgoing
// connection will take, for a server a test starts on loopback.
func FreePort() int {
	ginkgo.GinkgoHelper()
	p, err := ports()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	port, err := p.Take()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return port
}

// AwaitAdmitted waits until c may create obj, in a dry run. Webhooks that
// read from a manager's cache (upstream Trainer's read a job's runtime
// from it alone) refuse an object whose dependencies were created just
// before until the cache has them.
func AwaitAdmitted(ctx context.Context, c client.Client, obj client.Object) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func() error {
		return c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
	}, Timeout, Interval).Should(gomega.Succeed(), "%s is not admitted, in a dry run", obj.GetName())
}

// ServiceAccountReview is the subject of a SubjectAccessReview for what a
// ServiceAccount's token may do: the user and groups the API server
// authenticates that token as. The API server's RBAC authorizer reads
// roles and bindings from its informers, so a test asks it, not the
// objects it just created, whether they are in effect.
func ServiceAccountReview(ns, name string) authorizationv1.SubjectAccessReviewSpec {
	return authorizationv1.SubjectAccessReviewSpec{
		User:   serviceaccount.MakeUsername(ns, name),
		Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated),
	}
}
