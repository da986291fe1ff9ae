// kwok and its simulated GPU nodes.

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/hack/repo"
	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// Node shape of the simulated cluster: GPU nodes in racks of two, in one
// block, so topology-aware placement has somewhere to place.
const (
	nodeCPU    = "32"
	nodeMemory = "256Gi"
	nodeGPUs   = "8"
)

func (c *cluster) startKwok(ctx context.Context) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	kwok, err := moduleDir("sigs.k8s.io/kwok", "controllers")
	if err != nil {
		return err
	}
	stages := []string{
		filepath.Join(kwok, "kustomize", "stage", "node", "fast", "node-initialize.yaml"),
		filepath.Join(kwok, "kustomize", "stage", "node", "heartbeat", "node-heartbeat.yaml"),
		filepath.Join(kwok, "kustomize", "stage", "pod", "fast", "pod-ready.yaml"),
	}
	ours, err := filepath.Glob(filepath.Join(root, "test", "localcluster", "kwok", "*.yaml"))
	if err != nil {
		return err
	}
	var config strings.Builder
	for _, f := range append(stages, ours...) {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		config.WriteString("---\n")
		config.Write(data)
		config.WriteString("\n")
	}
	configFile := filepath.Join(c.dir, "config", "kwok.yaml")
	if err := os.WriteFile(configFile, []byte(config.String()), 0o644); err != nil {
		return err
	}
	// Valid for kwok's own address too, which metrics-server checks
	// (-metrics-server).
	var ips []net.IP
	if c.kwokAddress != "" {
		ips = append(ips, net.ParseIP(c.kwokAddress))
	}
	serving := filepath.Join(c.ca.Dir, "kwok")
	if err := c.ca.ServingCertFor(serving, "kwok", ips); err != nil {
		return err
	}
	addr, err := c.addKwokAddress(ctx)
	if err != nil {
		return err
	}
	for i := range c.nodes {
		if err := c.client.Create(ctx, kwokNode(i, c.realNode)); err != nil {
			return fmt.Errorf("creating node: %w", err)
		}
	}
	_, _, err = c.run(ctx, supervisor.Component{
		Name: "kwok", Ports: 1,
		Command: func(_ context.Context, p []int) (supervisor.Spec, error) {
			return supervisor.Spec{Argv: []string{
				c.bin("kwok"), "--kubeconfig=" + c.kubeconfig(), "--config=" + configFile,
				"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
				"--node-ip=" + addr, "--node-port=" + strconv.Itoa(p[0]),
				"--server-address=" + net.JoinHostPort(addr, strconv.Itoa(p[0])),
				"--tls-cert-file=" + filepath.Join(serving, "tls.crt"),
				"--tls-private-key-file=" + filepath.Join(serving, "tls.key"),
				"--cidr=" + kwokPodCIDR,
			}}, nil
		},
		Ready: c.nodesReady,
	})
	return err
}

// kwokAddressFile records the address up added for kwok, for down to
// remove.
const kwokAddressFile = "kwok-address"

// takenRanges are the local cluster's own ranges, which kwok's address
// must stay out of: the real nodes' bridge and pods, their secondary
// network, kwok's pods and the Services.
var takenRanges = []string{"10.234.0.0/16", localNetworkSubnet, kwokPodCIDR, "10.96.0.0/16"}

// kwokPodCIDR is where kwok gives its pods their addresses.
const kwokPodCIDR = "10.244.0.0/16"

// checkKwokAddress accepts no address (kwok on 127.0.0.1) or a private
// IPv4 address outside the cluster's own ranges that up can add to the
// loopback interface: one the API server's node proxy accepts (not
// loopback, link-local or multicast) and that no other machine routes
// here.
func checkKwokAddress(a string, root bool) error {
	if a == "" {
		return nil
	}
	ip := net.ParseIP(a)
	if ip == nil || ip.To4() == nil || !ip.IsPrivate() {
		return fmt.Errorf("-kwok-address %q: give a private IPv4 address, such as 10.236.0.1", a)
	}
	for _, r := range takenRanges {
		if _, n, _ := net.ParseCIDR(r); n.Contains(ip) {
			return fmt.Errorf("-kwok-address %s is in %s, which the local cluster uses: give another, such as 10.236.0.1", a, r)
		}
	}
	if !root {
		return fmt.Errorf("-kwok-address %s: adding it to the loopback interface needs root", a)
	}
	return nil
}

// addKwokAddress returns the address kwok serves on, adding
// -kwok-address to the loopback interface first, and recording it for
// down (an address already there, left by a cluster killed before its
// down, is taken over). Where iptables is installed, packets for it that
// come from another interface are dropped: kwok's endpoint runs exec'd
// commands on the host, so it answers local clients alone.
func (c *cluster) addKwokAddress(ctx context.Context) (string, error) {
	if c.kwokAddress == "" {
		return "127.0.0.1", nil
	}
	if err := os.WriteFile(filepath.Join(c.dir, kwokAddressFile), []byte(c.kwokAddress+"\n"), 0o644); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "ip", "-o", "-4", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("listing the loopback interface's addresses: %w: %s", err, out)
	}
	if !strings.Contains(string(out), " "+c.kwokAddress+"/") {
		if out, err := exec.CommandContext(ctx, "ip", "addr", "add", c.kwokAddress+"/32", "dev", "lo").CombinedOutput(); err != nil {
			return "", fmt.Errorf("adding kwok's address %s to the loopback interface: %w: %s", c.kwokAddress, err, out)
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		c.logf("no iptables: kwok's address %s is not routed here, but not guarded either", c.kwokAddress)
	} else if exec.CommandContext(ctx, "iptables", kwokGuard("-C", c.kwokAddress)...).Run() != nil {
		if out, err := exec.CommandContext(ctx, "iptables", kwokGuard("-I", c.kwokAddress)...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("guarding kwok's address %s against other interfaces: %w: %s", c.kwokAddress, err, out)
		}
	}
	return c.kwokAddress, nil
}

// kwokGuard is the iptables rule (op: -C, -I, -D) that drops packets for
// kwok's address arriving on any interface but loopback.
func kwokGuard(op, addr string) []string {
	return []string{op, "INPUT", "-d", addr + "/32", "!", "-i", "lo", "-j", "DROP"}
}

// removeKwokAddress takes the address up added for kwok, and its rule,
// off the host once kwok has stopped.
func (c *cluster) removeKwokAddress() error {
	data, err := os.ReadFile(filepath.Join(c.dir, kwokAddressFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	addr := strings.TrimSpace(string(data))
	if _, err := exec.LookPath("iptables"); err == nil {
		for exec.Command("iptables", kwokGuard("-C", addr)...).Run() == nil {
			if out, err := exec.Command("iptables", kwokGuard("-D", addr)...).CombinedOutput(); err != nil {
				return fmt.Errorf("removing the rule that guards %s against other interfaces: %w: %s", addr, err, out)
			}
		}
	}
	if out, err := exec.Command("ip", "addr", "del", addr+"/32", "dev", "lo").CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot assign requested address") {
		return fmt.Errorf("removing %s from the loopback interface: %w: %s", addr, err, out)
	}
	return os.Remove(filepath.Join(c.dir, kwokAddressFile))
}

// gpuTaint keeps the kwok nodes, which simulate GPU nodes, for pods that
// ask for GPUs when a real node runs beside them: everything else lands
// on the real node and really runs. The ExtendedResourceToleration
// admission plugin gives a pod that requests nvidia.com/gpu a toleration
// for a taint of that key; a many-node test that asks for no GPUs
// tolerates it itself. Without a real node, kwok nodes are the only ones
// and carry no taint.
var gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// kwokNode is a simulated GPU node; tainted when a real node runs too.
// resourceMetricsPath is the node annotation that moves a node's resource
// metrics from the kubelet's /metrics/resource (metrics-server's name).
const resourceMetricsPath = "metrics.k8s.io/resource-metrics-path"

func kwokNode(i int, tainted bool) *corev1.Node {
	name := fmt.Sprintf("kwok-node-%d", i)
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(nodeCPU),
		corev1.ResourceMemory: resource.MustParse(nodeMemory),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      resource.MustParse(nodeGPUs),
		// RDMA devices as the SR-IOV network device plugin (InfiniBand VFs)
		// and NVIDIA's RDMA shared device plugin advertise them.
		"openshift.io/mlnxib":       resource.MustParse("8"),
		"rdma/hca_shared_devices_a": resource.MustParse("100"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":            name,
				"kubernetes.io/os":                  "linux",
				"type":                              "kwok",
				"cloud.provider.com/topology-block": "block-0",
				"cloud.provider.com/topology-rack":  fmt.Sprintf("rack-%d", i/2),
			},
			Annotations: map[string]string{
				"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0",
				// Where kwok serves this node's resource metrics
				// (kwok/metrics.yaml), as metrics-server and kubectl mpi
				// top read it.
				resourceMetricsPath: "/metrics/nodes/" + name + "/metrics/resource",
			},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if tainted {
		node.Spec.Taints = []corev1.Taint{gpuTaint}
	}
	return node
}
