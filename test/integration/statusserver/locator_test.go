package statusserver_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/torus-mpi/torus/operator/statusserver"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// Where OLM installs the operator, it names the webhooks' Service
// <deployment>-service and keeps their CA in the Secret
// <deployment>-service-cert under olmCAKey: the bundle's flags name both.
var _ = Describe("the status server's locator", func() {
	It("finds the server through the Service and the CA Secret its flags name, and follows the CA as it rotates", func() {
		ns := newNamespace("operator")
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torus-operator-service-cert"},
			Data:       map[string][]byte{"olmCAKey": []byte("first CA"), "tls.crt": []byte("serving"), "tls.key": []byte("key")},
		}
		service, err := statusserver.ParseServiceRef("torus-operator-service:443")
		Expect(err).NotTo(HaveOccurred())
		caSecret, err := statusserver.ParseSecretKeyRef("torus-operator-service-cert:olmCAKey")
		Expect(err).NotTo(HaveOccurred())
		l := &statusserver.Locator{Service: service, CASecret: caSecret, Namespace: ns, Reader: k8s,
			Log: ctrl.Log.WithName("locator"), Refresh: 200 * time.Millisecond}
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- l.Start(lctx) }()
		DeferCleanup(func() { cancel(); Eventually(done, 10*time.Second).Should(Receive(BeNil())) })

		By("no Secret yet: no location")
		Consistently(l.Current, time.Second, 100*time.Millisecond).Should(BeNil())

		By("the Secret: the Service's address and the Secret's CA")
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		Eventually(l.Current, 30*time.Second, 100*time.Millisecond).Should(Equal(&trainerstatus.Server{
			URL: "https://torus-operator-service." + ns + ".svc:443", CA: "first CA",
		}))

		By("a new CA in the Secret")
		secret.Data["olmCAKey"] = []byte("second CA")
		Expect(k8s.Update(ctx, secret)).To(Succeed())
		Eventually(func() string { return l.Current().CA }, 30*time.Second, 100*time.Millisecond).Should(Equal("second CA"))
	})
})
