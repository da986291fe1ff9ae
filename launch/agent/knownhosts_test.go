package agent

import (
	"io"
	"log"
	"net"
	"strings"
	"testing"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// The client trusts the known_hosts Torus renders into a job's Secret: a
// host presenting the job's host key is let through, one presenting the
// job's client key is refused, both when it runs a command and when the
// launcher's wait checks the host key alone. Every pod of the job holds
// the client key; were it a host key, any of them could answer as any
// worker.
func TestKnownHostsRefuseTheClientKey(t *testing.T) {
	keys, next := newKeys(t), newKeys(t)
	data := mpi.SSHSecretData("pi", 0, keys, next, mpi.SSHSettings{Path: "/home/mpiuser/.ssh", Port: mpi.DefaultSSHPort})
	knownHosts := tempFile(t, mpi.SSHKnownHosts, data[mpi.SSHKnownHosts])
	keyFile := tempFile(t, mpi.SSHPrivateKeyFile, keys.ClientPrivate)
	cases := map[string]struct {
		// serverKey is the private key the host presents.
		serverKey []byte
		wantErr   bool
	}{
		"the job's host key":        {serverKey: keys.HostPrivate},
		"the job's client key":      {serverKey: keys.ClientPrivate, wantErr: true},
		"the next run's client key": {serverKey: next.ClientPrivate, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := NewServer(tc.serverKey, keys.ClientPublic)
			if err != nil {
				t.Fatal(err)
			}
			s.Log = log.New(io.Discard, "", 0)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			go func() { _ = s.Serve(l) }()
			port := l.Addr().(*net.TCPAddr).Port

			c, err := NewClient(keyFile, knownHosts)
			if err != nil {
				t.Fatal(err)
			}
			c.Port = port
			stdout, stderr, code := run(c, "", "127.0.0.1", "echo ran")
			refused := code == ExitFailure && strings.Contains(stderr, "Host key verification failed.")
			if tc.wantErr != refused || (!tc.wantErr && (code != 0 || stdout != "ran\n")) {
				t.Errorf("Run = %d, stdout %q, stderr %q; want refused = %t", code, stdout, stderr, tc.wantErr)
			}
			if err := c.CheckHostKey("127.0.0.1", port, waitTimeout); (err != nil) != tc.wantErr {
				t.Errorf("CheckHostKey = %v, want an error: %t", err, tc.wantErr)
			}
		})
	}
}
