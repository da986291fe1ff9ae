package main

import (
	"errors"
	"io"
	"slices"
	"testing"
)

// Each verb takes -dir and -testbin and its own flags, and no other verb's.
func TestParse(t *testing.T) {
	verb := func(name string) command {
		i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
		if i < 0 {
			t.Fatalf("no verb %s", name)
		}
		return commands[i]
	}
	for _, tc := range []struct {
		verb string
		args []string
		err  error // errUsage, or nil for a parse that succeeds; others: any error
		bad  bool
	}{
		{verb: "up", args: []string{"-dir", "d", "-testbin", "t", "-real-node", "-real-nodes", "2", "-openshift", "-operator", ""}},
		{verb: "up", args: []string{"-real-nodes", "0"}, bad: true},
		{verb: "up", args: []string{"-real-nodes", "17"}, bad: true},
		{verb: "up", args: []string{"-pods-ready-timeout", "45m"}},
		{verb: "up", args: []string{"-pods-ready-timeout", "0s"}, bad: true},
		{verb: "down", args: []string{"-pods-ready-timeout", "45m"}, err: errUsage},
		{verb: "up", args: []string{"-kueue-concurrency", "JobSet.jobset.x-k8s.io=5,Workload.kueue.x-k8s.io=20"}},
		{verb: "up", args: []string{"-kueue-concurrency", "JobSet.jobset.x-k8s.io=0"}, err: errUsage},
		{verb: "up", args: []string{"-kueue-concurrency", "JobSet.jobset.x-k8s.io"}, err: errUsage},
		{verb: "up", args: []string{"-suite", "bookworm"}, err: errUsage},
		{verb: "up", args: []string{"-metrics-server"}, bad: true}, // needs -kwok-address
		{verb: "down", args: []string{"-metrics-server"}, err: errUsage},
		{verb: "down", args: []string{"-dir", "d", "-testbin", "t"}},
		{verb: "down", args: []string{"-real-node"}, err: errUsage},
		{verb: "status", args: []string{"extra"}, bad: true},
		{verb: "node-check", args: []string{"-testbin", "t"}},
		{verb: "image", args: []string{"-suite", "bookworm-nossh", "-tag", "r/x:1", "-o", "f.tar"}},
		{verb: "image", args: []string{"-nodes", "3"}, err: errUsage},
	} {
		c, err := parse(verb(tc.verb), tc.args, io.Discard)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s %q: error %v, want %v", tc.verb, tc.args, err, tc.err)
		case tc.bad && err == nil:
			t.Errorf("%s %q: parsed, want an error", tc.verb, tc.args)
		case tc.err == nil && !tc.bad && (err != nil || c == nil):
			t.Errorf("%s %q: %v", tc.verb, tc.args, err)
		}
	}
}

// -kwok-address takes a private IPv4 address outside the cluster's own
// ranges, which the API server's node proxy accepts and no other machine
// routes here, and root to add it.
func TestCheckKwokAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		root bool
		ok   bool
	}{
		{addr: "", ok: true},
		{addr: "10.236.0.1", root: true, ok: true},
		{addr: "192.168.7.9", root: true, ok: true},
		{addr: "10.236.0.1", root: false},
		{addr: "10.235.0.1", root: true}, // the real nodes' secondary network
		{addr: "10.234.0.1", root: true}, // their bridge
		{addr: "10.244.3.4", root: true}, // kwok's pods
		{addr: "10.96.0.10", root: true}, // Services
		{addr: "127.0.0.2", root: true},
		{addr: "169.254.0.1", root: true},
		{addr: "8.8.8.8", root: true},
		{addr: "fd00::1", root: true},
		{addr: "10.235.0.1/32", root: true},
		{addr: "kwok", root: true},
	} {
		if err := checkKwokAddress(tc.addr, tc.root); (err == nil) != tc.ok {
			t.Errorf("checkKwokAddress(%q, root %v): %v, want ok %v", tc.addr, tc.root, err, tc.ok)
		}
	}
}
