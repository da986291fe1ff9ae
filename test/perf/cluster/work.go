package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/torus-mpi/torus/test/localcluster/supervisor"
)

// operatorWork is what the local cluster's operator process has done so
// far: its CPU time, read from /proc through the PID file test/localcluster
// keeps, and its TrainJob reconciles and API requests, read from its
// metrics as a scraper allowed by RBAC reads them.
type operatorWork struct {
	cpu                  time.Duration
	reconciles, requests float64
	// byMethod is requests by HTTP method (GET for reads and watches,
	// POST for creates, PATCH and PUT for changes, DELETE).
	byMethod counts
}

func (w operatorWork) minus(o operatorWork) operatorWork {
	return operatorWork{cpu: w.cpu - o.cpu, reconciles: w.reconciles - o.reconciles, requests: w.requests - o.requests, byMethod: w.byMethod.minus(o.byMethod)}
}

// operatorMeter reads operatorWork.
type operatorMeter struct {
	pid   int
	url   string
	token string
	http  *http.Client
	// controller is the TrainJob controller's name in the reconcile
	// metrics.
	controller string
}

// newOperatorMeter finds the TrainJob controller of the cluster whose
// directory holds kubeconfig, Torus's operator or upstream's
// trainer-controller-manager, and gets a token that may read its metrics:
// a ServiceAccount of the benchmark's namespace bound to get /metrics.
func newOperatorMeter(ctx context.Context, c client.Client, cs kubernetes.Interface, kubeconfig, ns string, upstream bool) (*operatorMeter, error) {
	dir := filepath.Dir(kubeconfig)
	component, controller := "torus-operator", "trainjob"
	if upstream {
		component, controller = "trainer-controller-manager", "trainjob_controller"
	}
	pidFile := filepath.Join(dir, "pids", component+".pid")
	rec, err := supervisor.ReadPIDFile(pidFile)
	if err != nil {
		return nil, fmt.Errorf("the PID of %s (test/localcluster keeps it): %w", component, err)
	}
	if !rec.Alive() {
		return nil, fmt.Errorf("%s (pid %d, %s) is not running", component, rec.PID, pidFile)
	}
	pid := rec.PID
	addr, err := metricsAddress(pid, dir, upstream)
	if err != nil {
		return nil, err
	}
	const name = "bench-metrics"
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns + "-metrics"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token to read the operator's metrics: %w", err)
	}
	return &operatorMeter{
		pid: pid, url: "https://" + addr + "/metrics", token: tr.Status.Token, controller: controller,
		// The operator's own serving certificate, on loopback.
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
	}, nil
}

// metricsAddress is where the controller of PID serves its metrics: the
// operator's --metrics-bind-address, or the metrics bindAddress of the
// configuration test/localcluster wrote for upstream's.
func metricsAddress(pid int, dir string, upstream bool) (string, error) {
	if upstream {
		path := filepath.Join(dir, "config", "upstream-trainer.yaml")
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		var cfg struct {
			Metrics struct {
				BindAddress string `json:"bindAddress"`
			} `json:"metrics"`
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil || cfg.Metrics.BindAddress == "" {
			return "", fmt.Errorf("%s names no metrics address (%v)", path, err)
		}
		return cfg.Metrics.BindAddress, nil
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", err
	}
	for _, a := range strings.Split(string(cmdline), "\x00") {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("the operator (PID %d) was started without --metrics-bind-address", pid)
}

// cleanup deletes the cluster-wide objects newOperatorMeter made.
func (m *operatorMeter) cleanup(ctx context.Context, c client.Client, ns string) {
	_ = c.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics"}})
	_ = c.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics"}})
}

// read takes a snapshot of the operator's work.
func (m *operatorMeter) read(ctx context.Context) (operatorWork, error) {
	var w operatorWork
	cpu, err := processCPU(m.pid)
	if err != nil {
		return w, err
	}
	w.cpu = cpu

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return w, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.http.Do(req)
	if err != nil {
		return w, fmt.Errorf("reading the operator's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return w, fmt.Errorf("reading the operator's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return w, fmt.Errorf("parsing the operator's metrics: %w", err)
	}
	w.reconciles = sum(families["controller_runtime_reconcile_total"], "controller", m.controller)
	w.requests = sum(families["rest_client_requests_total"], "", "")
	w.byMethod = counts{}
	if f := families["rest_client_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" {
					w.byMethod[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return w, nil
}

// sum adds a counter's series, those whose label has value when label is
// set.
func sum(f *dto.MetricFamily, label, value string) float64 {
	if f == nil {
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		if label != "" {
			match := false
			for _, l := range m.GetLabel() {
				match = match || (l.GetName() == label && l.GetValue() == value)
			}
			if !match {
				continue
			}
		}
		total += m.GetCounter().GetValue()
	}
	return total
}

// processCPU is a process's CPU time so far, from /proc.
func processCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// utime and stime, fields 14 and 15, after the command's parentheses.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat has %d fields after the command", pid, len(fields))
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// The kernel's USER_HZ is 100 on Linux.
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// clusterCPU is the CPU time so far, in seconds, of every process of the
// local cluster whose directory holds kubeconfig, by component: where a
// burst's time goes on a machine whose cores they all share.
func clusterCPU(kubeconfig string) (counts, error) {
	files, err := filepath.Glob(filepath.Join(filepath.Dir(kubeconfig), "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	c := counts{}
	for _, f := range files {
		rec, err := supervisor.ReadPIDFile(f)
		if err != nil {
			return nil, fmt.Errorf("the cluster's PIDs (test/localcluster keeps them): %w", err)
		}
		if !rec.Alive() {
			continue
		}
		cpu, err := processCPU(rec.PID)
		if err != nil {
			return nil, fmt.Errorf("the CPU of %s: %w", f, err)
		}
		c[strings.TrimSuffix(filepath.Base(f), ".pid")] = cpu.Seconds()
	}
	return c, nil
}

// cpuSince is the cluster's CPU time since before, by component.
func cpuSince(kubeconfig string, before counts) (counts, error) {
	now, err := clusterCPU(kubeconfig)
	if err != nil {
		return nil, err
	}
	return now.minus(before), nil
}
