package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func stepNames(steps []step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.name
	}
	return out
}

// What up starts, and what status and down then expect, for each mix of
// modes and TrainJob controller.
func TestPlanAndExpected(t *testing.T) {
	base := []string{"etcd", "kube-apiserver", "controller-manager and scheduler", "CRDs"}
	controllers := []string{"kwok and nodes", "JobSet", "Kueue"}
	realWorkloads := []string{"runtimes for the real nodes", "the real nodes' secondary network", "the real nodes' storage"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		c        cluster
		steps    []string
		expected []string
	}{{
		name:     "kwok nodes and the operator",
		c:        cluster{operator: "/bin/torus-operator"},
		steps:    cat(base, controllers, []string{"Torus operator"}),
		expected: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset", "kueue", "torus-operator"},
	}, {
		name:     "no operator (the install tier brings its own)",
		c:        cluster{},
		steps:    cat(base, controllers),
		expected: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset", "kueue"},
	}, {
		name:     "upstream Trainer's controller instead of the operator",
		c:        cluster{operator: "/bin/torus-operator", upstream: true},
		steps:    cat(base, controllers, []string{"upstream Trainer"}),
		expected: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset", "kueue", upstreamTrainer},
	}, {
		name:  "two real nodes",
		c:     cluster{operator: "/bin/torus-operator", realNode: true, realNodes: 2},
		steps: cat([]string{"the real nodes' network"}, base, []string{"real nodes"}, controllers, []string{"Torus operator"}, realWorkloads),
		expected: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
			"containerd-0", "containerd-1", "coredns", "kubelet-0", "kubelet-1", "kube-router-0", "kube-router-1",
			"kwok", "jobset", "kueue", "torus-operator"},
	}, {
		name: "OpenShift's admission with a real node",
		c:    cluster{operator: "/bin/torus-operator", realNode: true, realNodes: 1, openshift: true},
		steps: cat([]string{"the real nodes' network"}, base, []string{"OpenShift's SCC admission", "real nodes"}, controllers,
			[]string{"Torus operator"}, realWorkloads),
		expected: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "openshift-scc",
			"containerd-0", "coredns", "kubelet-0", "kube-router-0", "kwok", "jobset", "kueue", "torus-operator"},
	}, {
		name:     "the metrics API",
		c:        cluster{operator: "/bin/torus-operator", kwokAddress: "10.236.0.1", metricsServer: true},
		steps:    cat(base, controllers, []string{"Torus operator", "metrics-server"}),
		expected: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset", "kueue", "torus-operator", "metrics-server"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.dir = t.TempDir()
			if diff := cmp.Diff(tc.steps, stepNames(c.plan())); diff != "" {
				t.Errorf("up's steps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.expected, c.expected()); diff != "" {
				t.Errorf("components (-want +got):\n%s", diff)
			}
		})
	}
}

// status and down, which take none of up's flags, expect what the state
// directory shows was started: the operator, OpenShift's admission,
// metrics-server and upstream's controller by their PID files.
func TestExpectedFromState(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	if err := os.MkdirAll(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "openshift-scc", "torus-operator", "metrics-server"} {
		if err := os.WriteFile(filepath.Join(pids, name+".pid"), []byte("1 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := cluster{dir: dir}
	want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "openshift-scc", "kwok", "jobset", "kueue", "torus-operator", "metrics-server"}
	if diff := cmp.Diff(want, c.expected()); diff != "" {
		t.Errorf("components (-want +got):\n%s", diff)
	}
}
