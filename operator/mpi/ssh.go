package mpi

import (
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// SSHKeys is the key material of one job: the client key the launcher logs
// in with and the host key every worker's sshd presents. Private halves are
// OpenSSH PEM; public halves are authorized_keys lines.
type SSHKeys struct {
	ClientPrivate []byte
	ClientPublic  []byte
	HostPrivate   []byte
	HostPublic    []byte
}

// String keeps private keys out of logs and fmt output.
func (k *SSHKeys) String() string { return "SSHKeys{redacted}" }

// GenerateSSHKeys makes a fresh ed25519 client key and host key.
func GenerateSSHKeys(random io.Reader, comment string) (*SSHKeys, error) {
	clientPriv, clientPub, err := ed25519Pair(random, comment)
	if err != nil {
		return nil, fmt.Errorf("generating client key: %w", err)
	}
	hostPriv, hostPub, err := ed25519Pair(random, comment)
	if err != nil {
		return nil, fmt.Errorf("generating host key: %w", err)
	}
	return &SSHKeys{ClientPrivate: clientPriv, ClientPublic: clientPub, HostPrivate: hostPriv, HostPublic: hostPub}, nil
}

func ed25519Pair(random io.Reader, comment string) (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(random)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(block), ssh.MarshalAuthorizedKey(sshPub), nil
}

// SSHSettings say where a job's SSH files live in its pods and which port
// sshd listens on.
type SSHSettings struct {
	// Path is the SSH directory (mlPolicy.mpi.sshAuthMountPath).
	Path string
	Port int32
}

// SSHSecretData is the content of a job's SSH Secret: the keys and the
// configuration ssh and sshd read, all generated together so that they
// agree. It holds two generations of keys: current for the JobSet runs up
// to run, next for any later one. A JobSet restart creates the new run's
// pods at once, while Torus replaces the (immutable) Secret only after it
// sees the restart, so some of those pods may mount the Secret made for
// the run before and others the new one. Each pod takes the generation
// for its own run (its restart-attempt label, see SSHSetupScript), and
// the new Secret's current keys are the old one's next: every pod of a run
// gets the same keys whichever Secret it mounted.
func SSHSecretData(trainJob string, run int32, current, next *SSHKeys, s SSHSettings) map[string][]byte {
	data := map[string][]byte{
		SSHClientConfig: []byte(ClientConfig(s)),
		SSHDaemonConfig: []byte(SSHDConfig(s)),
		SSHRun:          []byte(strconv.Itoa(int(run))),
	}
	for prefix, keys := range map[string]*SSHKeys{"": current, SSHNextPrefix: next} {
		data[prefix+SSHPrivateKey] = keys.ClientPrivate
		data[prefix+SSHPublicKey] = keys.ClientPublic
		data[prefix+SSHAuthorizedKeys] = keys.ClientPublic
		data[prefix+SSHHostKey] = keys.HostPrivate
		data[prefix+SSHHostPublicKey] = keys.HostPublic
		data[prefix+SSHKnownHosts] = []byte(KnownHosts(trainJob, s.Port, keys.HostPublic, keys.ClientPublic))
	}
	return data
}

// NextSSHKeys reads the next generation of keys from a job's SSH Secret
// data, if it has one.
func NextSSHKeys(data map[string][]byte) (*SSHKeys, bool) {
	k := &SSHKeys{
		ClientPrivate: data[SSHNextPrefix+SSHPrivateKey],
		ClientPublic:  data[SSHNextPrefix+SSHPublicKey],
		HostPrivate:   data[SSHNextPrefix+SSHHostKey],
		HostPublic:    data[SSHNextPrefix+SSHHostPublicKey],
	}
	if len(k.ClientPrivate) == 0 || len(k.ClientPublic) == 0 || len(k.HostPrivate) == 0 || len(k.HostPublic) == 0 {
		return nil, false
	}
	return k, true
}

// KnownHostsPatterns are the host patterns of a job's pods in known_hosts:
// every name form of the launcher and the workers (short, with subdomain,
// fully qualified), at the job's sshd port.
func KnownHostsPatterns(trainJob string, port int32) []string {
	patterns := make([]string, 0, 2)
	for _, rjob := range []string{LauncherJob, NodeJob} {
		p := trainJob + "-" + rjob + "-*"
		if port != 22 {
			// ssh looks up "[host]:port" for any port but 22.
			p = fmt.Sprintf("[%s]:%d", p, port)
		}
		patterns = append(patterns, p)
	}
	return patterns
}

// KnownHosts trusts the job's keys as host keys, for the job's host names
// only: its host key, which Torus's sshd configuration serves, and its user
// key, which upstream's MPI images serve as host key (see
// UpstreamPrivateKeyFile). Both are the job's own and secret to its pods.
func KnownHosts(trainJob string, port int32, hostPublic, clientPublic []byte) string {
	patterns := strings.Join(KnownHostsPatterns(trainJob, port), ",")
	var b strings.Builder
	for _, key := range [][]byte{hostPublic, clientPublic} {
		b.WriteString(patterns + " " + strings.TrimSpace(string(key)) + "\n")
	}
	return b.String()
}

// ClientConfig is the ssh client configuration MPI launchers use (passed
// with -F). Host keys are always verified against the job's known_hosts.
func ClientConfig(s SSHSettings) string {
	return fmt.Sprintf(`Host *
  Port %d
  IdentityFile %s/%s
  IdentitiesOnly yes
  UserKnownHostsFile %s/%s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectionAttempts 10
  LogLevel ERROR
`, s.Port, s.Path, SSHPrivateKeyFile, s.Path, SSHKnownHosts)
}

// SSHDConfig runs sshd as whatever user the pod runs as (no root needed, no
// PAM), with the job's host key and keys only.
//
// StrictModes is off because the SSH directory is an emptyDir Kubernetes
// creates world-writable and owned by root, which an unprivileged user cannot
// chmod; the files in it are the user's own, mode 0600.
func SSHDConfig(s SSHSettings) string {
	return fmt.Sprintf(`Port %d
HostKey %s/%s
AuthorizedKeysFile %s/%s
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
PermitUserEnvironment no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
`, s.Port, s.Path, SSHHostKey, s.Path, SSHAuthorizedKeys)
}

// sshFiles maps Secret keys to file names in the SSH directory and modes.
var sshFiles = []struct {
	key, file string
	mode      string
	// keyed files come in two generations (SSHSecretData).
	keyed bool
}{
	{SSHPrivateKey, SSHPrivateKeyFile, "0600", true},
	{SSHPublicKey, SSHPublicKeyFile, "0644", true},
	{SSHPrivateKey, UpstreamPrivateKeyFile, "0600", true},
	{SSHPublicKey, UpstreamPublicKeyFile, "0644", true},
	{SSHAuthorizedKeys, SSHAuthorizedKeys, "0600", true},
	{SSHKnownHosts, SSHKnownHosts, "0644", true},
	{SSHClientConfig, SSHClientConfig, "0600", false},
	{SSHHostKey, SSHHostKey, "0600", true},
	{SSHHostPublicKey, SSHHostPublicKey, "0644", true},
	{SSHDaemonConfig, SSHDaemonConfig, "0600", false},
}

// SSHFileModes lists, per file name in the SSH directory, the mode the init
// container gives it.
func SSHFileModes() map[string]string {
	m := make(map[string]string, len(sshFiles))
	for _, f := range sshFiles {
		m[f.file] = f.mode
	}
	return m
}

// SSHSetupScript is the init container's shell script. It copies the Secret
// into the pod's SSH directory so that every file is owned by the user the
// pod runs as, with the modes ssh and sshd demand (0600 for private keys).
// Secret volumes cannot do that: their files belong to root, and fsGroup
// makes them group-readable, which ssh refuses for the owner. A pod of a
// later JobSet run than the Secret's current keys are for takes the next
// ones (SSHSecretData); its run comes from EnvRestartAttempt.
func SSHSetupScript(sshPath string) string {
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	fmt.Fprintf(&b, "d=%s\nmkdir -p \"$d\"\n", sshPath)
	fmt.Fprintf(&b, "k=\nif [ \"${%s:-0}\" -gt \"$(cat %s/%s)\" ]; then k=%s; fi\n", EnvRestartAttempt, SSHSecretMountPath, SSHRun, SSHNextPrefix)
	for _, f := range sshFiles {
		key := f.key
		if f.keyed {
			key = "${k}" + key
		}
		fmt.Fprintf(&b, "cp %s/%s \"$d/%s\" && chmod %s \"$d/%s\"\n", SSHSecretMountPath, key, f.file, f.mode, f.file)
	}
	// The directory may be an emptyDir the user does not own; chmod only
	// where allowed.
	b.WriteString("chmod 0700 \"$d\" 2>/dev/null || true\n")
	return b.String()
}
