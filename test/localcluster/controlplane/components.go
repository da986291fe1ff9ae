package controlplane

import (
	"fmt"
	"net"
	"path/filepath"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// EtcdArgs is etcd's command line for a single member on 127.0.0.1.
func EtcdArgs(bin, name, dataDir string, clientPort, peerPort int) []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	return []string{
		bin, "--name=" + name, "--data-dir=" + dataDir,
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + name + "=" + peer, "--listen-metrics-urls=",
		// Local control planes for tests, the demo and benchmarks: what is
		// measured or tested is the API server and controllers, not the disk.
		"--unsafe-no-fsync",
	}
}

// APIServerArgs is kube-apiserver's command line on bindAddress:securePort
// (127.0.0.1 when empty) with etcd on etcdPort: certificates from a
// (written here), RBAC, the admin's static token and service-account
// tokens. extra flags follow.
func APIServerArgs(bin string, a *Authority, etcdPort, securePort int, bindAddress string, extra ...string) ([]string, error) {
	if bindAddress == "" {
		bindAddress = "127.0.0.1"
	}
	serving := filepath.Join(a.Dir, "kube-apiserver")
	if err := a.ServingCertFor(serving, "kube-apiserver", []net.IP{net.ParseIP(bindAddress)},
		"kubernetes", "kubernetes.default", "kubernetes.default.svc"); err != nil {
		return nil, err
	}
	saKey, saPub, err := a.ServiceAccountKey()
	if err != nil {
		return nil, err
	}
	tokens, err := a.TokenFile()
	if err != nil {
		return nil, err
	}
	// Its identity towards kubelets (logs, exec, metrics of real nodes).
	kubeletClient := filepath.Join(a.Dir, "kubelet-client")
	if err := a.ClientCert(kubeletClient, "kube-apiserver-kubelet-client", "system:masters"); err != nil {
		return nil, err
	}
	return append([]string{
		bin,
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=" + bindAddress, "--advertise-address=" + bindAddress,
		fmt.Sprintf("--secure-port=%d", securePort),
		"--tls-cert-file=" + filepath.Join(serving, "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(serving, "tls.key"),
		"--client-ca-file=" + a.CAFile,
		"--token-auth-file=" + tokens,
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--authorization-mode=RBAC",
		"--kubelet-client-certificate=" + filepath.Join(kubeletClient, "tls.crt"),
		"--kubelet-client-key=" + filepath.Join(kubeletClient, "tls.key"),
	}, extra...), nil
}

// AdminConfig is the admin's client configuration for server.
func (a *Authority) AdminConfig(server string) *rest.Config {
	return &rest.Config{Host: server, BearerToken: a.AdminToken, TLSClientConfig: rest.TLSClientConfig{CAData: a.CAPEM()}}
}

// AdminKubeconfig is the admin's kubeconfig for server: one cluster and
// context called name, in namespace default.
func (a *Authority) AdminKubeconfig(name, server string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: a.CAPEM()}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: a.AdminToken}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = name
	return cfg
}
