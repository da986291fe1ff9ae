// Package controlplane holds what the local cluster (test/localcluster) and the
// benchmark (test/perf/controlplane) share to run etcd and kube-apiserver on 127.0.0.1:
// a certificate authority with the files the API server reads, the two
// components' command lines, and the admin's credentials. Each caller runs
// the processes its own way: the cluster detached with PID files, the
// benchmark as children it measures.
package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity of the certificates: a local control plane lives for a session.
const validity = 7 * 24 * time.Hour

// Authority is a control plane's certificate authority and the files made
// from it. It signs the API server's certificate and every other local
// server's (webhooks, kwok, proxies); all of them answer on 127.0.0.1.
type Authority struct {
	// Dir holds the CA, the service-account keys and the token file.
	Dir string
	// CAFile is the CA certificate, PEM.
	CAFile string
	// AdminToken authenticates the admin (system:masters) by the API
	// server's static token file.
	AdminToken string

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewAuthority makes a CA called name and an admin token, in dir.
func NewAuthority(dir, name string) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	a := &Authority{Dir: dir, CAFile: filepath.Join(dir, "ca.crt"), cert: cert, key: key}
	if err := writePEM(a.CAFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	a.AdminToken = hex.EncodeToString(token)
	return a, nil
}

// CAPEM is the CA certificate, PEM-encoded, for kubeconfigs and webhook
// configurations.
func (a *Authority) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.cert.Raw})
}

// CertPool trusts the CA alone.
func (a *Authority) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(a.cert)
	return pool
}

// ClientCert writes tls.crt and tls.key into dir: a client certificate
// for user cn in groups orgs.
func (a *Authority) ClientCert(dir, cn string, orgs ...string) error {
	return a.issue(dir, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// ServingCert writes tls.crt and tls.key, the layout controller-runtime's
// webhook server reads, into dir: a certificate for a server on 127.0.0.1
// and localhost, and the extra DNS names given.
func (a *Authority) ServingCert(dir, name string, dnsNames ...string) error {
	return a.ServingCertFor(dir, name, nil, dnsNames...)
}

// ServingCertFor is ServingCert valid also for the addresses ips.
func (a *Authority) ServingCertFor(dir, name string, ips []net.IP, dnsNames ...string) error {
	return a.issue(dir, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    append([]string{"localhost"}, dnsNames...),
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
	})
}

// issue signs tmpl (given a serial and validity here) with a new key and
// writes tls.crt and tls.key into dir.
func (a *Authority) issue(dir string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); err != nil {
		return err
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(validity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return fmt.Errorf("signing a certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "tls.crt"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "tls.key"), "EC PRIVATE KEY", keyDER, 0o600)
}

// ServiceAccountKey writes the RSA key pair that signs and verifies service
// account tokens (sa.key, sa.pub).
func (a *Authority) ServiceAccountKey() (keyFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyFile, pubFile = filepath.Join(a.Dir, "sa.key"), filepath.Join(a.Dir, "sa.pub")
	if err := writePEM(keyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600); err != nil {
		return "", "", err
	}
	return keyFile, pubFile, writePEM(pubFile, "PUBLIC KEY", pubDER, 0o644)
}

// TokenFile writes the API server's static token file: the admin alone.
func (a *Authority) TokenFile() (string, error) {
	f := filepath.Join(a.Dir, "tokens.csv")
	return f, os.WriteFile(f, []byte(a.AdminToken+",admin,admin,system:masters\n"), 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
