package launchagent

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			s := Setup{SecretDir: secret, Dir: dir, RunKey: "run", NextPrefix: "next-", PodRun: tc.run, Link: tc.link, Files: []SetupFile{
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
	target, err := os.Readlink(filepath.Join(dir, SSHClientName))
	if err != nil || target != filepath.Base(self) {
		t.Fatalf("%s links to %q (%v), want %q", SSHClientName, target, err, filepath.Base(self))
	}
	fi, err := os.Stat(filepath.Join(dir, SSHClientName))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the installed binary: %v, %v", fi, err)
	}
}

// TestSetupWaitsForTheJobsAgents runs the launcher's wait against a server
// holding the job's keys, one holding other keys, and a port where nothing
// listens.
func TestSetupWaitsForTheJobsAgents(t *testing.T) {
	keys := newKeys(t)
	other := startJob(t)
	ours, err := NewServer(keys.HostPrivate, keys.ClientPublic)
	if err != nil {
		t.Fatal(err)
	}
	port := serve(t, func(c net.Conn) { ours.serveConn(c) })
	// A port that takes connections and closes them, as a pod whose agent
	// has not started yet refuses them.
	closing := serve(t, func(c net.Conn) { c.Close() })
	for _, tc := range []struct {
		name string
		port int
		// say is what the wait says; "" for nothing.
		say string
	}{
		{"the job's agent: no wait", port, ""},
		{"an agent with other keys: starts anyway, saying why", other.port, "does not accept the job's key"},
		{"no agent yet: starts anyway, saying why", closing, "does not accept the job's key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			hostfile := filepath.Join(dir, "hostfile")
			if err := os.WriteFile(hostfile, []byte("127.0.0.1 slots=2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			s := Setup{SecretDir: secretDir(t, keys, newKeys(t)), Dir: filepath.Join(dir, "ssh"), RunKey: "run", Log: &out,
				Files: []SetupFile{
					{Key: mpi.SSHPrivateKey, Name: mpi.SSHPrivateKeyFile, Mode: 0o600, Keyed: true},
					{Key: mpi.SSHKnownHosts, Name: mpi.SSHKnownHosts, Mode: 0o644, Keyed: true},
				},
				Wait: &Wait{Hostfile: hostfile, Port: tc.port, Key: mpi.SSHPrivateKeyFile, KnownHosts: mpi.SSHKnownHosts,
					ResolveTimeout: time.Second, AcceptTimeout: time.Second}}
			start := time.Now()
			if err := s.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.say == "" && out.Len() > 0 {
				t.Errorf("the wait said %q", out.String())
			}
			if tc.say != "" && !strings.Contains(out.String(), "torus: waiting for the job's hosts to accept the job's key") {
				t.Errorf("the wait did not say what it waits for: %q", out.String())
			}
			if !strings.Contains(out.String(), tc.say) {
				t.Errorf("the wait said %q, want %q", out.String(), tc.say)
			}
			if elapsed := time.Since(start); tc.say != "" && elapsed < time.Second {
				t.Errorf("gave up after %s, before its bound", elapsed)
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
