package controller_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/operator/metacreate"
	"github.com/torus-mpi/torus/pkg/scheme"
)

// answers keeps the body of every answer to a POST.
type answers struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []string
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	a.mu.Lock()
	a.got = append(a.got, string(body))
	a.mu.Unlock()
	return resp, nil
}

func (a *answers) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[len(a.got)-1]
}

var _ = Describe("Creates answered with metadata only", Ordered, func() {
	var (
		c  *metacreate.Client
		aw *answers
		ns = "metacreate"
	)

	BeforeAll(func() {
		cfg := rest.CopyConfig(fw.Config)
		aw = &answers{}
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { aw.next = rt; return aw })
		httpClient, err := rest.HTTPClientFor(cfg)
		Expect(err).NotTo(HaveOccurred())
		plain, err := client.New(cfg, client.Options{Scheme: scheme.New(), HTTPClient: httpClient})
		Expect(err).NotTo(HaveOccurred())
		c = metacreate.Wrap(plain, cfg, httpClient)
		Expect(fw.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	})

	It("creates a custom resource, sets the server's metadata on it, and is answered without its spec", func() {
		js := &jobsetv1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Name: "lean", Namespace: ns, Labels: map[string]string{"team": "a"}},
			Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "node", Replicas: 1,
			}}},
		}
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "busybox:1"}}
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		Expect(c.Create(ctx, js)).To(Succeed())
		Expect(aw.last()).To(ContainSubstring(`"kind":"PartialObjectMetadata"`))
		Expect(aw.last()).NotTo(ContainSubstring("busybox"), "the answer carried the object's spec")

		var stored jobsetv1alpha2.JobSet
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(js), &stored)).To(Succeed())
		Expect(js.UID).To(Equal(stored.UID))
		Expect(js.ResourceVersion).To(Equal(stored.ResourceVersion))
		Expect(js.CreationTimestamp).To(Equal(stored.CreationTimestamp))
		Expect(js.Labels).To(Equal(map[string]string{"team": "a"}))
		Expect(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image).To(Equal("busybox:1"), "the spec sent stays on the object")
	})

	It("creates a built-in kind in protobuf and reads back its metadata", func() {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "keys-", Namespace: ns},
			Data:       map[string][]byte{"k": []byte("secret-value")},
		}
		Expect(c.Create(ctx, s)).To(Succeed())
		Expect(s.Name).To(HavePrefix("keys-"), "the name the server generated")
		Expect(aw.last()).NotTo(ContainSubstring("c2VjcmV0LXZhbHVl"), "the answer carried the Secret's data")
		var stored corev1.Secret
		Expect(fw.Client.Get(ctx, client.ObjectKeyFromObject(s), &stored)).To(Succeed())
		Expect(s.UID).To(Equal(stored.UID))
		Expect(stored.Data).To(HaveKeyWithValue("k", []byte("secret-value")))
	})

	It("returns the API server's errors as client.Create does", func() {
		again := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "twice", Namespace: ns}}
		Expect(c.Create(ctx, again.DeepCopy())).To(Succeed())
		err := c.Create(ctx, again.DeepCopy())
		Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)

		bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name", Namespace: ns}}
		err = c.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(strings.ToLower(err.Error())).To(ContainSubstring("not_a_name"))
	})
})
