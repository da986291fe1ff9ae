package olm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/hack/manifests/render"
)

const fieldOwner = client.FieldOwner("torus-olm-test")

// bundleCSV reads the CSV make bundle wrote.
func bundleCSV() *operatorsv1alpha1.ClusterServiceVersion {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(root, "bundle", "manifests", "torus-operator.clusterserviceversion.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var csv operatorsv1alpha1.ClusterServiceVersion
	Expect(yaml.UnmarshalStrict(data, &csv)).To(Succeed())
	return &csv
}

// bundleCRDs reads the CRDs of bundle/manifests.
func bundleCRDs() []*unstructured.Unstructured {
	GinkgoHelper()
	files, err := filepath.Glob(filepath.Join(root, "bundle", "manifests", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var out []*unstructured.Unstructured
	for _, f := range files {
		objs, err := render.DecodeFile(f)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				out = append(out, o)
			}
		}
	}
	Expect(out).NotTo(BeEmpty())
	return out
}

// apply server-side applies an object as the suite's admin.
func apply(o *unstructured.Unstructured) {
	GinkgoHelper()
	Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership)).
		To(Succeed(), "applying %s %s", o.GetKind(), o.GetName())
}

func namespace(name string, labels map[string]string) {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
}

// deleteNamespace deletes a namespace and waits until it is gone.
func deleteNamespace(name string) {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(ns), ns))
	}, timeout, interval).Should(BeTrue(), "namespace %s is not deleted", name)
}

// servingCert writes a self-signed certificate for 127.0.0.1 as tls.crt and
// tls.key in dir, as controller-runtime's webhook server reads them, and
// returns the certificate's PEM for the webhooks' caBundle.
func servingCert(dir string) []byte {
	GinkgoHelper()
	crt, key := selfSigned([]net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)).To(Succeed())
	return crt
}

// selfSigned makes a self-signed ECDSA P-256 serving certificate for the
// addresses and DNS names, as cert-manager's selfSigned issuer would, and
// returns it and its key in PEM.
func selfSigned(ips []net.IP, dnsNames []string) (crt, key []byte) {
	GinkgoHelper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "torus-webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           ips,
		DNSNames:              dnsNames,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(k)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
