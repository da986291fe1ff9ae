package mpi

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/api"
)

func TestSSHKeys(t *testing.T) {
	for alg, want := range map[KeyAlgorithm]string{
		"":           ssh.KeyAlgoED25519,
		KeyEd25519:   ssh.KeyAlgoED25519,
		KeyECDSAP256: ssh.KeyAlgoECDSA256,
		KeyECDSAP384: ssh.KeyAlgoECDSA384,
		KeyRSA3072:   ssh.KeyAlgoRSA,
	} {
		t.Run(string(alg), func(t *testing.T) {
			keys, err := GenerateSSHKeys(rand.Reader, alg, "test")
			if err != nil {
				t.Fatal(err)
			}
			for name, pair := range map[string][2][]byte{
				"client": {keys.ClientPrivate, keys.ClientPublic},
				"host":   {keys.HostPrivate, keys.HostPublic},
			} {
				signer, err := ssh.ParsePrivateKey(pair[0])
				if err != nil {
					t.Fatalf("%s private key does not parse: %v", name, err)
				}
				if got := signer.PublicKey().Type(); got != want {
					t.Errorf("%s key type = %s, want %s", name, got, want)
				}
				if alg == KeyRSA3072 {
					if bits := signer.PublicKey().(ssh.CryptoPublicKey).CryptoPublicKey().(*rsa.PublicKey).N.BitLen(); bits != 3072 {
						t.Errorf("%s RSA key has %d bits, want 3072", name, bits)
					}
				}
				pub, _, _, _, err := ssh.ParseAuthorizedKey(pair[1])
				if err != nil {
					t.Fatalf("%s public key does not parse: %v", name, err)
				}
				if string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
					t.Errorf("%s public key does not match its private key", name)
				}
			}
			if strings.Contains(keys.String(), "PRIVATE") {
				t.Error("String() reveals key material")
			}
		})
	}
	if _, err := GenerateSSHKeys(rand.Reader, "dsa", "test"); err == nil || !strings.Contains(err.Error(), "rsa-3072") {
		t.Errorf("an unknown algorithm gives %v; want the list of algorithms", err)
	}
}

// TestKnownHosts checks the generated known_hosts with OpenSSH's own
// matching rules (as implemented by x/crypto's knownhosts).
func TestKnownHosts(t *testing.T) {
	keys, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	other, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "other")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(knownHosts("pi", 2222, keys.HostPublic)), 0o600); err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(file)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, _ := ssh.ParseAuthorizedKey(keys.HostPublic)
	otherKey, _, _, _, _ := ssh.ParseAuthorizedKey(other.HostPublic)
	userKey, _, _, _, _ := ssh.ParseAuthorizedKey(keys.ClientPublic)
	otherUserKey, _, _, _, _ := ssh.ParseAuthorizedKey(other.ClientPublic)
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 2222}
	cases := map[string]struct {
		host    string
		key     ssh.PublicKey
		wantErr bool
	}{
		"worker with subdomain":   {host: "pi-node-0-3.pi:2222", key: hostKey},
		"worker, fully qualified": {host: "pi-node-0-3.pi.default.svc.cluster.local:2222", key: hostKey},
		"worker, short name":      {host: "pi-node-0-12:2222", key: hostKey},
		"launcher as a node":      {host: "pi-launcher-0-0.pi:2222", key: hostKey},
		"another job's key":       {host: "pi-node-0-3.pi:2222", key: otherKey, wantErr: true},
		// Every pod holds the client key: a host presenting it may be
		// any of them, the launcher included.
		"the job's client key":     {host: "pi-node-0-3.pi:2222", key: userKey, wantErr: true},
		"another job's client key": {host: "pi-node-0-3.pi:2222", key: otherUserKey, wantErr: true},
		"another host":             {host: "db-0.pi:2222", key: hostKey, wantErr: true},
		"another port":             {host: "pi-node-0-3.pi:22", key: hostKey, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := check(tc.host, addr, tc.key)
			if (err != nil) != tc.wantErr {
				t.Errorf("host key check of %s: error = %v, wantErr %t", tc.host, err, tc.wantErr)
			}
		})
	}
}

// Host keys and client keys are distinct in the SSH directory each role's
// init script lays out: its known_hosts trusts the job's host key, which
// only the workers hold (as Torus's sshd configuration names it, and as
// id_rsa, which upstream's images' sshd serves), and never the client key,
// which every pod holds. Every private key a pod holds is tried as the key
// a host presents.
func TestKnownHostsTrustsOnlyHostKeys(t *testing.T) {
	current, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "current")
	if err != nil {
		t.Fatal(err)
	}
	next, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "next")
	if err != nil {
		t.Fatal(err)
	}
	data := SSHSecretData("pi", 0, current, next, SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222})
	// No hosts: the launcher's script has none to wait for.
	data[HostfileKey] = []byte{}
	cases := map[string]struct {
		role    string
		attempt string
		// wantTrusted: the private key files whose public key known_hosts
		// accepts from a worker; any other key file must be refused.
		wantTrusted []string
	}{
		"launcher":           {role: api.RoleLauncher},
		"launcher, next run": {role: api.RoleLauncher, attempt: "1"},
		"worker":             {role: api.RoleWorker, wantTrusted: []string{SSHHostKey, upstreamPrivateKeyFile}},
		"worker, next run":   {role: api.RoleWorker, attempt: "1", wantTrusted: []string{SSHHostKey, upstreamPrivateKeyFile}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mount, sshDir := writeSecretVolume(t, data, tc.role)
			runSetupScript(t, mount, sshDir, filepath.Join(t.TempDir(), "passwd"), tc.attempt, tc.role)
			check, err := knownhosts.New(filepath.Join(sshDir, SSHKnownHosts))
			if err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(sshDir)
			if err != nil {
				t.Fatal(err)
			}
			var trusted, keyFiles []string
			for _, e := range entries {
				pem, err := os.ReadFile(filepath.Join(sshDir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				signer, err := ssh.ParsePrivateKey(pem)
				if err != nil {
					continue
				}
				keyFiles = append(keyFiles, e.Name())
				addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 2222}
				if check("pi-node-0-0.pi:2222", addr, signer.PublicKey()) == nil {
					trusted = append(trusted, e.Name())
				}
			}
			if !slices.Contains(keyFiles, SSHPrivateKeyFile) {
				t.Fatalf("the %s's SSH directory holds no client key (%v)", tc.role, keyFiles)
			}
			slices.Sort(tc.wantTrusted)
			if !slices.Equal(trusted, tc.wantTrusted) {
				t.Errorf("known_hosts trusts the key files %v as host keys, want %v (of %v)", trusted, tc.wantTrusted, keyFiles)
			}
		})
	}
}

func TestSSHConfigs(t *testing.T) {
	s := SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222}
	client := ClientConfig(s)
	for _, want := range []string{"Port 2222", "StrictHostKeyChecking yes", "IdentityFile /home/mpiuser/.ssh/id_ed25519", "UserKnownHostsFile /home/mpiuser/.ssh/known_hosts"} {
		if !strings.Contains(client, want) {
			t.Errorf("client config lacks %q:\n%s", want, client)
		}
	}
	if strings.Contains(strings.ToLower(client), "stricthostkeychecking no") {
		t.Error("client config disables host key checking")
	}
	if sshd := sshdConfig(s); !strings.Contains(sshd, "StrictModes no") {
		t.Errorf("a job started by an earlier Torus (its record lacks StrictModes) gets StrictModes:\n%s", sshd)
	}
	s.StrictModes = true
	sshd := sshdConfig(s)
	if !strings.Contains(sshd, "StrictModes yes") {
		t.Errorf("sshd config lacks StrictModes yes:\n%s", sshd)
	}
	for _, want := range []string{"Port 2222", "HostKey /home/mpiuser/.ssh/ssh_host_ed25519_key", "PasswordAuthentication no", "UsePAM no"} {
		if !strings.Contains(sshd, want) {
			t.Errorf("sshd config lacks %q:\n%s", want, sshd)
		}
	}
	for _, role := range []string{api.RoleLauncher, api.RoleWorker} {
		script := SSHSetupScript(s.Path, s.Port, role, &HostsWait{})
		for file, mode := range SSHFileModes(role) {
			found := false
			for _, line := range strings.Split(script, "\n") {
				if strings.HasPrefix(line, "chmod "+mode+" ") && slices.Contains(strings.Fields(line), "\"$d/"+file+"\"") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s's setup script does not give %s mode %s:\n%s", role, file, mode, script)
			}
		}
		if got := SSHFileModes(role)[SSHPrivateKeyFile]; got != "0600" {
			t.Errorf("%s's private key mode = %s, want 0600", role, got)
		}
	}
}

func BenchmarkGenerateSSHKeys(b *testing.B) {
	for _, alg := range KeyAlgorithms {
		b.Run(string(alg), func(b *testing.B) {
			for b.Loop() {
				if _, err := GenerateSSHKeys(rand.Reader, alg, "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The init script, run by a real sh on a Secret written out as the kubelet
// would: a pod takes the keys of its own JobSet run, so that pods of one
// run agree whichever of two successive Secrets they mounted.
func TestSSHSetupScriptPicksTheRunsKeys(t *testing.T) {
	gen := func() *SSHKeys {
		k, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "test")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k1, k2, k3 := gen(), gen(), gen()
	settings := SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222}
	// The Secret made for run 0, and its replacement after one restart.
	run0 := SSHSecretData("job", 0, k1, k2, settings)
	run1 := SSHSecretData("job", 1, k2, k3, settings)
	if next, ok := NextSSHKeys(run0); !ok || !bytes.Equal(next.ClientPrivate, k2.ClientPrivate) {
		t.Fatalf("NextSSHKeys of run 0's Secret: %v, want run 1's keys", ok)
	}
	cases := []struct {
		name    string
		secret  map[string][]byte
		attempt string // unset when empty
		want    *SSHKeys
	}{
		{"no restart label: the current keys", run0, "", k1},
		{"run 0 on run 0's Secret", run0, "0", k1},
		{"run 1 on run 0's Secret: the next keys", run0, "1", k2},
		{"run 1 on run 1's Secret: the same keys", run1, "1", k2},
		{"run 2 on run 1's Secret", run1, "2", k3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mount, sshDir := writeSecretVolume(t, tc.secret, api.RoleWorker)
			runSetupScript(t, mount, sshDir, filepath.Join(t.TempDir(), "passwd"), tc.attempt, api.RoleWorker)
			for file, want := range map[string][]byte{
				SSHPrivateKeyFile: tc.want.ClientPrivate, SSHHostKey: tc.want.HostPrivate, sshAuthorizedKeys: tc.want.ClientPublic,
			} {
				got, err := os.ReadFile(filepath.Join(sshDir, file))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s is not the keys of the pod's run", file)
				}
			}
			known, err := os.ReadFile(filepath.Join(sshDir, SSHKnownHosts))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(known, bytes.TrimSpace(tc.want.HostPublic)) {
				t.Errorf("known_hosts does not trust the run's host key")
			}
		})
	}
}

// Each role's pods mount and copy only what they use: the launcher, which
// runs no sshd, gets no host key; workers keep the client key for MPI's
// tree launch. The script runs with only the role's Secret items mounted,
// as the kubelet projects them.
func TestSSHFilesPerRole(t *testing.T) {
	keys, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	data := SSHSecretData("job", 0, keys, keys, SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222})
	data[HostfileKey] = []byte("localhost slots=2\n")
	for role, absent := range map[string][]string{
		api.RoleLauncher: {SSHHostKey, SSHHostPublicKey, SSHDaemonConfig, sshAuthorizedKeys},
		api.RoleWorker:   nil,
	} {
		t.Run(role, func(t *testing.T) {
			for _, item := range SSHSecretItems(role) {
				if slices.Contains(absent, strings.TrimPrefix(item.Key, sshNextPrefix)) {
					t.Errorf("the %s mounts Secret key %s", role, item.Key)
				}
			}
			mount, sshDir := writeSecretVolume(t, data, role)
			runSetupScript(t, mount, sshDir, filepath.Join(t.TempDir(), "passwd"), "", role)
			entries, err := os.ReadDir(sshDir)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, e := range entries {
				got[e.Name()] = true
				info, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				if want := SSHFileModes(role)[e.Name()]; want != "" && fmt.Sprintf("%04o", info.Mode().Perm()) != want {
					t.Errorf("the %s's %s has mode %04o, want %s", role, e.Name(), info.Mode().Perm(), want)
				}
			}
			for file := range SSHFileModes(role) {
				if !got[file] {
					t.Errorf("the %s's SSH directory lacks %s", role, file)
				}
				delete(got, file)
			}
			if len(got) > 0 {
				t.Errorf("the %s's SSH directory has files beyond its own: %v", role, got)
			}
			modes := SSHFileModes(role)
			if _, ok := modes[SSHPrivateKeyFile]; !ok {
				t.Errorf("the %s has no client key", role)
			}
			for _, file := range absent {
				if _, ok := modes[file]; ok {
					t.Errorf("the %s gets %s", role, file)
				}
			}
		})
	}
}

// writeSecretVolume writes the Secret data a role's pods mount
// (SSHSecretItems) as the kubelet would, and returns the directory and where
// the init script puts the SSH directory beside it.
func writeSecretVolume(t *testing.T, data map[string][]byte, role string) (mount, sshDir string) {
	t.Helper()
	dir := t.TempDir()
	mount = filepath.Join(dir, "secret")
	if err := os.Mkdir(mount, 0o755); err != nil {
		t.Fatal(err)
	}
	items := SSHSecretItems(role)
	if items == nil {
		// No items: the kubelet projects every key.
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, item := range items {
		v, ok := data[item.Key]
		if !ok {
			// The kubelet refuses to start the pod.
			t.Fatalf("the %s's Secret volume names key %s, which the Secret lacks", role, item.Key)
		}
		if err := os.WriteFile(filepath.Join(mount, item.Path), v, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	// The SSH volume: an emptyDir, world-writable as the kubelet makes it.
	volume := filepath.Join(dir, "volume")
	if err := os.Mkdir(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(volume, 0o777); err != nil {
		t.Fatal(err)
	}
	return mount, filepath.Join(volume, SSHDirSubPath)
}

// runSetupScript runs the init script with a real sh, its paths moved into
// the test's directories and passwd as the image's user database.
func runSetupScript(t *testing.T, mount, sshDir, passwd, attempt, role string) {
	t.Helper()
	if _, err := os.Stat(passwd); os.IsNotExist(err) {
		if err := os.WriteFile(passwd, []byte("nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := setupScriptCommand(mount, sshDir, passwd, role, "")
	if attempt != "" {
		cmd.Env = append(cmd.Env, EnvRestartAttempt+"="+attempt)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("script: %v: %s", err, out)
	}
}

func setupScriptCommand(mount, sshDir, passwd, role, callBack string) *exec.Cmd {
	script := strings.NewReplacer(SSHSecretMountPath, mount, SSHVolumeMountPath, filepath.Dir(sshDir), PasswdPath, passwd).
		Replace(SSHSetupScript("/home/mpiuser/.ssh", 2222, role, &HostsWait{CallBack: callBack}))
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	return cmd
}

// The launcher's init container holds mpirun back until every host of the
// hostfile resolves, in each implementation's format, and for Hydra the
// launcher's own name, which the proxies connect back to. The resolver
// here is a getent on PATH that answers for "late" and "self" only from
// their third question on, as DNS names that trail the pods' readiness.
func TestSSHSetupScriptWaitsForHosts(t *testing.T) {
	keys, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	// Every implementation's hostfile format: the script reads the host as
	// what comes before the first blank or colon of each line.
	for _, impl := range Implementations {
		t.Run(string(impl), func(t *testing.T) {
			data := SSHSecretData("job", 0, keys, keys, SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222})
			data[HostfileKey] = []byte(Hostfile(impl, Placement{SlotsPerHost: 2, Hosts: []Host{{Address: "early"}, {Address: "late"}}}))
			mount, sshDir := writeSecretVolume(t, data, api.RoleLauncher)
			bin := t.TempDir()
			asked := filepath.Join(t.TempDir(), "asked")
			getent := `#!/bin/sh
[ "$1" = hosts ] || exit 1
echo "$2" >> "$ASKED"
case "$2" in
early) exit 0 ;;
late|self) [ "$(grep -c "^$2\$" "$ASKED")" -ge 3 ] ;;
*) exit 2 ;;
esac
`
			if err := os.WriteFile(filepath.Join(bin, "getent"), []byte(getent), 0o755); err != nil {
				t.Fatal(err)
			}
			// Every host accepts connections at once (see
			// TestSSHSetupScriptWaitsForConnections).
			if err := os.WriteFile(filepath.Join(bin, "ssh-keyscan"), []byte("#!/bin/sh\necho \"host ssh-ed25519 AAAA\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			passwd := filepath.Join(t.TempDir(), "passwd")
			if err := os.WriteFile(passwd, []byte("nobody:x:65534:65534::/:/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var callBack string
			want := "early\nlate\nlate\nlate\n"
			if impl.NeedsSearchDomain() {
				callBack = "self"
				want = "self\nself\nself\n" + want
			}
			cmd := setupScriptCommand(mount, sshDir, passwd, api.RoleLauncher, callBack)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "ASKED=" + asked}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("script: %v: %s", err, out)
			}
			got, err := os.ReadFile(asked)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("getent was asked:\n%s\nwant:\n%s", got, want)
			}
			first := "late"
			if callBack != "" {
				first = callBack
			}
			if !strings.Contains(string(out), "waiting for the job's hosts to resolve ("+first+")") {
				t.Errorf("the script did not say what it waits for: %s", out)
			}
		})
	}
}

// The launcher's init container holds mpirun back until every worker's
// sshd accepts its connection, asked by the real ssh-keyscan: here a
// worker at 127.0.0.1 whose server (x/crypto/ssh, with the job's host key)
// starts listening only after the script has found it refusing. The
// launcher's own line, which no sshd serves, is not waited for.
func TestSSHSetupScriptWaitsForConnections(t *testing.T) {
	if _, err := exec.LookPath("ssh-keyscan"); err != nil {
		t.Skip("ssh-keyscan is not installed: the script skips the wait without it")
	}
	keys, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on until the server starts.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/sys/kernel/hostname")
	if err != nil {
		t.Skip("no /proc/sys/kernel/hostname: the launcher's own line cannot be named")
	}
	data := SSHSecretData("job", 0, keys, keys, SSHSettings{Path: "/home/mpiuser/.ssh", Port: int32(port)})
	data[HostfileKey] = []byte(strings.TrimSpace(string(self)) + ".job slots=2\n127.0.0.1 slots=2\n")
	mount, sshDir := writeSecretVolume(t, data, api.RoleLauncher)
	passwd := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(passwd, []byte("nobody:x:65534:65534::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer(SSHSecretMountPath, mount, SSHVolumeMountPath, filepath.Dir(sshDir), PasswdPath, passwd).
		Replace(SSHSetupScript("/home/mpiuser/.ssh", int32(port), api.RoleLauncher, &HostsWait{}))
	// Every name resolves: this test is about connections.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "getent"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The worker's sshd starts once the script has said it waits.
	waiting := fmt.Sprintf("torus: waiting for the job's hosts to accept connections on port %d (127.0.0.1)", port)
	for !strings.Contains(out.String(), waiting) {
		select {
		case err := <-done:
			t.Fatalf("the script ended (%v) before any sshd listened:\n%s", err, out.String())
		default:
			time.Sleep(50 * time.Millisecond)
		}
	}
	signer, err := ssh.ParsePrivateKey(keys.HostPrivate)
	if err != nil {
		t.Fatal(err)
	}
	config := &ssh.ServerConfig{NoClientAuth: true}
	config.AddHostKey(signer)
	l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// The key exchange is all ssh-keyscan asks for.
				_, _, _, _ = ssh.NewServerConn(c, config)
			}()
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("script: %v:\n%s", err, out.String())
		}
	case <-time.After(hostsAcceptTimeout):
		t.Fatalf("the script still waits though the worker accepts connections:\n%s", out.String())
	}
	if strings.Contains(out.String(), "starting anyway") {
		t.Errorf("the script gave up on a host:\n%s", out.String())
	}
}

// lockedBuffer is a bytes.Buffer that a command writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The init script gives ssh and sshd an account for the pod's UID when the
// image has none (OpenShift's assigned UIDs), keeps the image's own
// otherwise, and leaves the SSH directory the user's own with mode 0700.
func TestSSHSetupScriptUserDatabase(t *testing.T) {
	keys, err := GenerateSSHKeys(rand.Reader, DefaultKeyAlgorithm, "test")
	if err != nil {
		t.Fatal(err)
	}
	data := SSHSecretData("job", 0, keys, keys, SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222})
	uid, gid := os.Getuid(), os.Getgid()
	own := fmt.Sprintf("me:x:%d:%d::/home/me:/bin/sh\n", uid, gid)
	added := fmt.Sprintf("%s:x:%d:%d:Torus MPI:/home/mpiuser/.ssh:/bin/sh\n", PasswdUser, uid, gid)
	cases := []struct {
		name, image, want string
	}{
		{"image without the UID", "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n", "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n" + added},
		{"last line without newline", "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh", "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n" + added},
		{"image with the UID", "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n" + own, "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n" + own},
		{"UID on the last line without newline", strings.TrimSuffix(own, "\n"), strings.TrimSuffix(own, "\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mount, sshDir := writeSecretVolume(t, data, api.RoleWorker)
			passwd := filepath.Join(t.TempDir(), "passwd")
			if err := os.WriteFile(passwd, []byte(tc.image), 0o644); err != nil {
				t.Fatal(err)
			}
			runSetupScript(t, mount, sshDir, passwd, "", api.RoleWorker)
			got, err := os.ReadFile(filepath.Join(filepath.Dir(sshDir), PasswdSubPath))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("user database:\n%s\nwant:\n%s", got, tc.want)
			}
			st, err := os.Stat(sshDir)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o700 {
				t.Errorf("SSH directory mode %o, want 0700 (sshd's StrictModes)", st.Mode().Perm())
			}
		})
	}
}
