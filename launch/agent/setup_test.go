package agent

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/torus-mpi/torus/launch/cmdline"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// secretDir writes a job's SSH Secret, current keys for run 0 and the next
// generation, as the kubelet mounts it.
func secretDir(t *testing.T, current, next *mpi.SSHKeys) string {
	t.Helper()
	dir := t.TempDir()
	data := mpi.SSHSecretData("job", 0, current, next, mpi.SSHSettings{Path: "/ssh", Port: 2222})
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSetupCopiesTheRunsKeys(t *testing.T) {
	current, next := newKeys(t), newKeys(t)
	secret := secretDir(t, current, next)
	for _, tc := range []struct {
		name string
		run  int
		link bool
		want *mpi.SSHKeys
	}{
		{"a pod of the keys' run takes the current keys", 0, false, current},
		{"a pod of a later run takes the next keys", 1, false, next},
		{"linked, a pod of the keys' run takes the current keys", 0, true, current},
		{"linked, a pod of a later run takes the next keys", 1, true, next},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ssh")
			s := Setup{SecretDir: secret, Dir: dir, RunKey: "run", NextPrefix: "next-", PodRun: tc.run, Link: tc.link, Files: []cmdline.File{
				{Key: mpi.SSHPrivateKey, Name: "id", Mode: 0o600, Keyed: true},
				{Key: mpi.SSHClientConfig, Name: "config", Mode: 0o644},
			}}
			if err := s.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, "id"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want.ClientPrivate) {
				t.Errorf("copied the wrong generation of the client key")
			}
			want := map[string]os.FileMode{"": 0o700 | os.ModeDir, "id": 0o600, "config": 0o644}
			if tc.link {
				// Links the other containers' users pass through.
				want = map[string]os.FileMode{"": 0o755 | os.ModeDir, "id": os.ModeSymlink | 0o777, "config": os.ModeSymlink | 0o777}
			}
			for name, mode := range want {
				fi, err := os.Lstat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != mode {
					t.Errorf("%q has mode %v, want %v", name, fi.Mode(), mode)
				}
			}
		})
	}
}

func TestSetupInstallsTheBinaryAndItsClientName(t *testing.T) {
	dir := t.TempDir()
	s := Setup{SecretDir: secretDir(t, newKeys(t), newKeys(t)), Dir: filepath.Join(dir, "ssh"), RunKey: "run", InstallDir: dir}
	// Twice: an init container run again finds its earlier copy.
	for range 2 {
		if err := s.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	self, _ := os.Executable()
	target, err := os.Readlink(filepath.Join(dir, cmdline.ClientName))
	if err != nil || target != filepath.Base(self) {
		t.Fatalf("%s links to %q (%v), want %q", cmdline.ClientName, target, err, filepath.Base(self))
	}
	fi, err := os.Stat(filepath.Join(dir, cmdline.ClientName))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the installed binary: %v, %v", fi, err)
	}
}

// TestSetupWaitsForTheJobsHosts runs the launcher's wait against a server
// holding the job's keys, one holding other keys, a port that takes
// connections and closes them (a pod whose agent has not started yet
// refuses them), and one that starts serving the job's keys later.
func TestSetupWaitsForTheJobsHosts(t *testing.T) {
	keys := newKeys(t)
	other := startJob(t)
	ours, err := NewServer(keys.HostPrivate, keys.ClientPublic)
	if err != nil {
		t.Fatal(err)
	}
	// The job's host key, but another client key: OpenSSH's sshd when the
	// waiting container is not the pod's own user.
	strangers, err := NewServer(keys.HostPrivate, other.keys.ClientPublic)
	if err != nil {
		t.Fatal(err)
	}
	port := serve(t, func(c net.Conn) { ours.serveConn(c, func() {}) })
	hostKeyOnly := serve(t, func(c net.Conn) { strangers.serveConn(c, func() {}) })
	closing := serve(t, func(c net.Conn) { c.Close() })
	var up atomic.Bool
	later := serve(t, func(c net.Conn) {
		if !up.Load() {
			c.Close()
			return
		}
		ours.serveConn(c, func() {})
	})
	for _, tc := range []struct {
		name        string
		port        int
		hostKeyOnly bool
		// ready, when set, is written into the workers-ready file when
		// the wait has said what it waits for; otherwise the bound counts
		// from the start.
		ready bool
		// comeUp: the host starts serving once the wait has said what it
		// waits for.
		comeUp bool
		// say is what the wait says ("" for nothing); gaveUp, whether it
		// started anyway.
		say    string
		gaveUp bool
	}{
		{name: "the job's agent: no wait", port: port},
		{name: "an agent with other keys: starts anyway, saying why", port: other.port, say: "not the job's host key", gaveUp: true},
		{name: "no agent yet: starts anyway, saying why", port: closing, say: "waiting for 127.0.0.1", gaveUp: true},
		{name: "the job's host key alone, for OpenSSH's sshd", port: hostKeyOnly, hostKeyOnly: true},
		{name: "the job's host key with a client key refused", port: hostKeyOnly, say: "Permission denied", gaveUp: true},
		{name: "another host key, for OpenSSH's sshd", port: other.port, hostKeyOnly: true, say: "not the job's host key", gaveUp: true},
		{name: "no agent yet, then the job's: the wait ends when it answers", port: later, comeUp: true, say: "waiting for 127.0.0.1"},
		{name: "no agent until every worker is Ready: the bound counts from then", port: closing, ready: true, say: "every worker is Ready", gaveUp: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			hostfile := filepath.Join(dir, "hostfile")
			if err := os.WriteFile(hostfile, []byte("127.0.0.1 slots=2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := &syncBuffer{}
			w := &Wait{Hostfile: hostfile, Port: tc.port, Key: mpi.SSHPrivateKeyFile, KnownHosts: mpi.SSHKnownHosts,
				HostKeyOnly: tc.hostKeyOnly, Timeout: 300 * time.Millisecond}
			if tc.ready || tc.comeUp {
				w.ReadyFile = filepath.Join(dir, "workers-ready")
				if err := os.WriteFile(w.ReadyFile, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			up.Store(false)
			s := Setup{SecretDir: secretDir(t, keys, newKeys(t)), Dir: filepath.Join(dir, "ssh"), RunKey: "run", Log: out,
				Files: []cmdline.File{
					{Key: mpi.SSHPrivateKey, Name: mpi.SSHPrivateKeyFile, Mode: 0o600, Keyed: true},
					{Key: mpi.SSHKnownHosts, Name: mpi.SSHKnownHosts, Mode: 0o644, Keyed: true},
				},
				Wait: w}
			done := make(chan error, 1)
			go func() { done <- s.Run(context.Background()) }()
			var written time.Time
			if tc.ready || tc.comeUp {
				// The wait must hold until then, whatever its bound.
				for !strings.Contains(out.String(), "torus: waiting for 127.0.0.1") {
					select {
					case err := <-done:
						t.Fatalf("the wait ended (%v) before saying what it waits for: %q", err, out.String())
					case <-time.After(10 * time.Millisecond):
					}
				}
				time.Sleep(2 * w.Timeout)
				select {
				case err := <-done:
					t.Fatalf("the wait ended (%v) before the host was there or its workers Ready: %q", err, out.String())
				default:
				}
				written = time.Now()
				if tc.comeUp {
					up.Store(true)
				} else if err := os.WriteFile(w.ReadyFile, []byte(written.Format(time.RFC3339)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			said := out.String()
			if tc.say == "" && said != "" {
				t.Errorf("the wait said %q", said)
			}
			if !strings.Contains(said, tc.say) {
				t.Errorf("the wait said %q, want %q", said, tc.say)
			}
			if gaveUp := strings.Contains(said, "starting anyway"); gaveUp != tc.gaveUp {
				t.Errorf("the wait started anyway: %t, want %t: %q", gaveUp, tc.gaveUp, said)
			}
			if tc.ready && time.Since(written) < w.Timeout {
				t.Errorf("gave up %s after the workers were Ready, before its bound %s", time.Since(written), w.Timeout)
			}
		})
	}
}

// serve runs handle on each connection to a new loopback listener and
// returns its port.
func serve(t *testing.T, handle func(net.Conn)) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}
