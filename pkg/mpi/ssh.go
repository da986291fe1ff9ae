package mpi

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/api"
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

// KeyAlgorithm is the type of a job's SSH keys (client and host).
type KeyAlgorithm string

// Key algorithms. Ed25519 is the default; OpenSSH in FIPS mode (as on
// OpenShift clusters for regulated users) refuses it and takes ECDSA on the
// NIST curves or RSA.
const (
	KeyEd25519   KeyAlgorithm = "ed25519"
	KeyECDSAP256 KeyAlgorithm = "ecdsa-p256"
	KeyECDSAP384 KeyAlgorithm = "ecdsa-p384"
	KeyRSA3072   KeyAlgorithm = "rsa-3072"
	// DefaultKeyAlgorithm is used when neither the job, its runtime nor
	// the operator's settings choose one.
	DefaultKeyAlgorithm = KeyEd25519
)

// KeyAlgorithms are the algorithms Torus generates keys with.
var KeyAlgorithms = []KeyAlgorithm{KeyEd25519, KeyECDSAP256, KeyECDSAP384, KeyRSA3072}

// ParseKeyAlgorithm reads a key algorithm's name.
func ParseKeyAlgorithm(s string) (KeyAlgorithm, error) {
	for _, a := range KeyAlgorithms {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown SSH key algorithm %q: use %s, %s, %s (FIPS) or %s (FIPS)", s, KeyEd25519, KeyECDSAP256, KeyECDSAP384, KeyRSA3072)
}

// GenerateSSHKeys makes a fresh client key and host key of an algorithm
// ("" is DefaultKeyAlgorithm).
func GenerateSSHKeys(random io.Reader, alg KeyAlgorithm, comment string) (*SSHKeys, error) {
	clientPriv, clientPub, err := keyPair(random, alg, comment)
	if err != nil {
		return nil, fmt.Errorf("generating client key: %w", err)
	}
	hostPriv, hostPub, err := keyPair(random, alg, comment)
	if err != nil {
		return nil, fmt.Errorf("generating host key: %w", err)
	}
	return &SSHKeys{ClientPrivate: clientPriv, ClientPublic: clientPub, HostPrivate: hostPriv, HostPublic: hostPub}, nil
}

func keyPair(random io.Reader, alg KeyAlgorithm, comment string) (private, public []byte, err error) {
	var priv crypto.Signer
	switch alg {
	case KeyEd25519, "":
		_, priv, err = ed25519.GenerateKey(random)
	case KeyECDSAP256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), random)
	case KeyECDSAP384:
		priv, err = ecdsa.GenerateKey(elliptic.P384(), random)
	case KeyRSA3072:
		priv, err = rsa.GenerateKey(random, 3072)
	default:
		_, err = ParseKeyAlgorithm(string(alg))
	}
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(priv.Public())
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
	// KeyAlgorithm is the job's or its runtime's choice
	// (api.AnnotationSSHKeyAlgorithm); "" leaves it to the operator.
	KeyAlgorithm KeyAlgorithm `json:",omitempty"`
	// StrictModes: the pods' SSH directory is laid out for sshd's
	// StrictModes (SSHSetupScript). Jobs whose JobSet an earlier Torus made
	// (their record lacks it) mounted the emptyDir itself, world-writable,
	// and keep an sshd configuration without StrictModes.
	StrictModes bool `json:",omitempty"`
	// Agent: the launcher starts MPI's daemons through Torus's launch
	// agent (api.AnnotationRemoteLaunch), not the image's OpenSSH.
	Agent bool `json:",omitempty"`
	// AgentBinary is where the job's image holds torus-launch
	// (api.AnnotationLaunchAgentPath): an agent job's containers set
	// themselves up with it, and need no init container. Empty: the init
	// container brings it from Torus's image.
	AgentBinary string `json:",omitempty"`
	// AgentDelivery is how torus-launch reaches the pods of an image that
	// does not hold it (api.AnnotationLaunchAgentDelivery): the job's or
	// its runtime's choice, "" leaving it to the operator. Delivered by
	// image volume, AgentBinary is the volume's (LaunchImageVolumeBinary).
	AgentDelivery string `json:",omitempty"`
}

// AgentDir is the SSH directory of an agent job's containers: the
// runtime's, mounted from the pod's SSH volume, where an init container
// fills it; the volume's own, where the container fills it itself
// (AgentBinary), as only the directory's maker may set its mode.
func (s SSHSettings) AgentDir() string {
	if s.AgentBinary != "" {
		return path.Join(SSHVolumeMountPath, SSHDirSubPath)
	}
	return s.Path
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
		SSHDaemonConfig: []byte(sshdConfig(s)),
		sshRun:          []byte(strconv.Itoa(int(run))),
	}
	for prefix, keys := range map[string]*SSHKeys{"": current, sshNextPrefix: next} {
		data[prefix+SSHPrivateKey] = keys.ClientPrivate
		data[prefix+sshPublicKey] = keys.ClientPublic
		data[prefix+sshAuthorizedKeys] = keys.ClientPublic
		data[prefix+SSHHostKey] = keys.HostPrivate
		data[prefix+SSHHostPublicKey] = keys.HostPublic
		data[prefix+SSHKnownHosts] = []byte(knownHosts(trainJob, s.Port, keys.HostPublic))
	}
	return data
}

// NextSSHKeys reads the next generation of keys from a job's SSH Secret
// data, if it has one.
func NextSSHKeys(data map[string][]byte) (*SSHKeys, bool) {
	k := &SSHKeys{
		ClientPrivate: data[sshNextPrefix+SSHPrivateKey],
		ClientPublic:  data[sshNextPrefix+sshPublicKey],
		HostPrivate:   data[sshNextPrefix+SSHHostKey],
		HostPublic:    data[sshNextPrefix+SSHHostPublicKey],
	}
	if len(k.ClientPrivate) == 0 || len(k.ClientPublic) == 0 || len(k.HostPrivate) == 0 || len(k.HostPublic) == 0 {
		return nil, false
	}
	return k, true
}

// knownHostsPatterns are the host patterns of a job's pods in known_hosts:
// every name form of the launcher and the workers (short, with subdomain,
// fully qualified), at the job's sshd port.
func knownHostsPatterns(trainJob string, port int32) []string {
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

// knownHosts trusts the job's host key, and it alone, for the job's host
// names only. Never the client key: every pod holds that one (the
// launcher logs in with it, workers launch in a tree with it), and a host
// key it could stand in for would let any of them answer as any worker.
// Upstream's MPI images, whose sshd serves "<ssh dir>/id_rsa" as host key,
// find the host key there on the workers (sshFiles).
func knownHosts(trainJob string, port int32, hostPublic []byte) string {
	patterns := strings.Join(knownHostsPatterns(trainJob, port), ",")
	return patterns + " " + strings.TrimSpace(string(hostPublic)) + "\n"
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

// sshdConfig runs sshd as whatever user the pod runs as (no root needed, no
// PAM), with the job's host key and keys only.
//
// StrictModes holds where the settings say so: the init container makes the
// SSH directory the user's own, mode 0700, and its files 0600/0644
// (SSHSetupScript). The account it adds for a UID the image lacks has the
// SSH directory as home, where sshd's walk up from authorized_keys stops:
// the directories above it belong to the image, not to an assigned UID.
func sshdConfig(s SSHSettings) string {
	strict := "no"
	if s.StrictModes {
		strict = "yes"
	}
	return fmt.Sprintf(`Port %d
HostKey %s/%s
AuthorizedKeysFile %s/%s
PidFile none
StrictModes %s
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
PermitUserEnvironment no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
`, s.Port, s.Path, SSHHostKey, s.Path, sshAuthorizedKeys, strict)
}

// sshFile is one file of the SSH directory, from a key of the Secret.
type sshFile struct {
	key, file string
	mode      os.FileMode
	// keyed files come in two generations (SSHSecretData).
	keyed bool
	// sshd's files: only workers run sshd. Workers keep the client key,
	// as MPI launches in a tree (Open MPI's daemons and Hydra's proxies
	// start those of other workers over ssh); the launcher never gets the
	// host key, which would let it pose as any worker.
	//
	// Upstream's MPI images start sshd with "HostKey <ssh dir>/id_rsa"
	// (upstreamPrivateKeyFile), their one key pair serving as user key and
	// host key. Torus's workers hold the host key under that name: a
	// client key there would have to be trusted as a host key, and anyone
	// holding it could answer as any worker. ssh's own identity is
	// id_ed25519 (ClientConfig: IdentitiesOnly).
	sshd bool
	// agent: Torus's launch agent and its client read it too
	// (LaunchSetupArgs).
	agent bool
}

// sshFiles maps Secret keys to file names in the SSH directory and modes.
var sshFiles = []sshFile{
	{SSHPrivateKey, SSHPrivateKeyFile, 0o600, true, false, true},
	{sshPublicKey, sshPublicKeyFile, 0o644, true, false, false},
	{SSHHostKey, upstreamPrivateKeyFile, 0o600, true, true, false},
	{SSHHostPublicKey, upstreamPublicKeyFile, 0o644, true, true, false},
	{SSHKnownHosts, SSHKnownHosts, 0o644, true, false, true},
	{SSHClientConfig, SSHClientConfig, 0o600, false, false, false},
	{sshAuthorizedKeys, sshAuthorizedKeys, 0o600, true, true, true},
	{SSHHostKey, SSHHostKey, 0o600, true, true, true},
	{SSHHostPublicKey, SSHHostPublicKey, 0o644, true, true, false},
	{SSHDaemonConfig, SSHDaemonConfig, 0o600, false, true, false},
}

// modeString is the file's mode as chmod takes it.
func (f sshFile) modeString() string { return fmt.Sprintf("%04o", uint32(f.mode)) }

// runsSSHD reports whether pods of a role run sshd: the workers.
func runsSSHD(role string) bool { return role != api.RoleLauncher }

// SSHFileModes lists, per file name in the SSH directory of a role's pods,
// the mode the init container gives it.
func SSHFileModes(role string) map[string]string {
	m := make(map[string]string, len(sshFiles))
	for _, f := range sshFiles {
		if !f.sshd || runsSSHD(role) {
			m[f.file] = f.modeString()
		}
	}
	return m
}

// SSHSecretItems are the keys of the job's SSH Secret a role's pods mount:
// what SSHSetupScript copies for the role, in both generations. Workers use
// every key but the hostfile, which is no secret, and mount them all (nil):
// a list of them would cost a kilobyte in every job's JobSet.
func SSHSecretItems(role string) []corev1.KeyToPath {
	if runsSSHD(role) {
		return nil
	}
	// The launcher's init container also waits for the hostfile's hosts
	// to resolve (SSHSetupScript).
	keys := []string{sshRun, HostfileKey}
	for _, f := range sshFiles {
		if f.sshd && !runsSSHD(role) {
			continue
		}
		keys = append(keys, f.key)
		if f.keyed {
			keys = append(keys, sshNextPrefix+f.key)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	items := make([]corev1.KeyToPath, len(keys))
	for i, k := range keys {
		items[i] = corev1.KeyToPath{Key: k, Path: k}
	}
	return items
}

// SSHSetupTools are the programs SSHSetupScript runs: the image of the
// launcher and the workers must have them (any POSIX shell and coreutils or
// busybox do). The launcher's also uses getent where the image has it
// (glibc's, in every Debian, Ubuntu and RHEL image).
var SSHSetupTools = []string{"sh", "mkdir", "chmod", "cp", "id", "cat", "tail", "sleep"}

// hostsResolveTimeout bounds how long the launcher's init container sleeps
// between lookups of the hostfile's hosts (a lookup that times out adds
// its own time) before mpirun starts anyway and reports what it finds.
const hostsResolveTimeout = 120 * time.Second

// hostsAcceptTimeout bounds the launcher's wait for its hosts to accept
// its connections: Torus's wait (waitArgs) from when every worker is
// Ready, SSHSetupScript's from its start. Policy agents admit a new pod's
// address within seconds; a refusal that outlasts this is a policy or an
// sshd that will not let the launcher in, and mpirun's ssh then says so in
// its own words (diagnosis explains them).
const hostsAcceptTimeout = 30 * time.Second

// HostsWait asks SSHSetupScript for the launcher's wait for its hosts.
type HostsWait struct {
	// CallBack is the launcher's own name, which Hydra's proxies connect
	// back to mpiexec by; "" for launchers that give addresses.
	CallBack string
}

// SSHSetupScript is the init container's shell script. It runs as the pod's
// user and fills the pod's SSH volume (mounted at SSHVolumeMountPath):
//
//   - SSHDirSubPath, the SSH directory the other containers mount at
//     sshPath: a copy of the Secret whose files are the user's own, mode
//     0700 for the directory and 0600 for private keys, as ssh and sshd
//     (StrictModes) demand. Secret volumes cannot do that: their files
//     belong to root, and fsGroup makes them group-readable, which ssh
//     refuses for the owner; an emptyDir's root is root's and 0777. A pod
//     of a later JobSet run than the Secret's current keys are for takes
//     the next ones (SSHSecretData); its run comes from EnvRestartAttempt.
//   - On the launcher, when hostsWait is set, a wait until every host of
//     the hostfile resolves (at most hostsResolveTimeout). This is the
//     wait of a launcher that starts once its workers are Ready, for an
//     operator with no image of its own to wait from (LaunchWaitArgs).
//     Workers are Ready before such a launcher starts, but their DNS names come from EndpointSlices that the
//     controller manager writes on its own schedule, which on a busy
//     cluster trails readiness by seconds; mpirun's ssh gives up at the
//     first name that does not resolve. When hostsWait.CallBack is set, the wait
//     covers that name too: the launcher's own, through which Hydra's
//     proxies on the workers connect back to mpiexec (Open MPI's daemons
//     are given addresses instead). The launcher's record is the newest
//     of the job's, written while this container runs, and a proxy that
//     cannot resolve it ends the job (mpiexec exits 255). CallBack is a
//     name relative to the pod's search path, such as HostAddress's: the
//     kubelet's /etc/hosts answers for the pod's own host name and fully
//     qualified name without asking DNS, so those would prove nothing.
//   - On the launcher, then, a wait until every worker of the hostfile
//     accepts a connection on the job's sshd port from this pod (at most
//     hostsAcceptTimeout), with ssh-keyscan where the image has it (as
//     OpenSSH's client package does in Debian, Ubuntu and RHEL): the
//     workers' readiness is the kubelet's probe, from the node, while a
//     NetworkPolicy agent admits a new pod's address only once it has
//     seen the pod, seconds after it starts. One host key is asked for,
//     of the type known_hosts holds, so each host takes one connection.
//   - PasswdSubPath, the user database the other containers mount over
//     /etc/passwd: the image's own, plus an account for the pod's UID if
//     the image has none. ssh refuses to run for a UID without one and sshd
//     to let it in, and OpenShift runs pods with a UID from the namespace's
//     range (GID 0) that no image knows.
func SSHSetupScript(sshPath string, port int32, role string, hostsWait *HostsWait) string {
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	fmt.Fprintf(&b, "v=%s\nd=\"$v/%s\"\ns=%s\nmkdir -p \"$d\"\nchmod 0700 \"$d\"\n", SSHVolumeMountPath, SSHDirSubPath, SSHSecretMountPath)
	fmt.Fprintf(&b, "k=\nif [ \"${%s:-0}\" -gt \"$(cat \"$s/%s\")\" ]; then k=%s; fi\n", EnvRestartAttempt, sshRun, sshNextPrefix)
	// One cp per file, then one chmod per mode: the script is in each of
	// the JobSet's two pod templates, written and stored with every job.
	// -f: a copy left read-only by a run cut short is replaced when the
	// init container runs again.
	var modes []string
	byMode := map[string][]string{}
	for _, f := range sshFiles {
		if f.sshd && !runsSSHD(role) {
			continue
		}
		key := f.key
		if f.keyed {
			key = "${k}" + key
		}
		fmt.Fprintf(&b, "cp -f \"$s/%s\" \"$d/%s\"\n", key, f.file)
		mode := f.modeString()
		if _, ok := byMode[mode]; !ok {
			modes = append(modes, mode)
		}
		byMode[mode] = append(byMode[mode], fmt.Sprintf("\"$d/%s\"", f.file))
	}
	for _, m := range modes {
		fmt.Fprintf(&b, "chmod %s %s\n", m, strings.Join(byMode[m], " "))
	}
	if hostsWait != nil && !runsSSHD(role) {
		callBack := hostsWait.CallBack
		// A hostfile line starts with the host: "host slots=N" or "host:N".
		fmt.Fprintf(&b, `if command -v getent >/dev/null; then
t=0
{ if [ -n "%[3]s" ]; then echo "%[3]s"; fi; cat "$s/%[1]s"; } | while read -r h rest || [ -n "$h" ]; do
h=${h%%%%:*}
while [ -n "$h" ] && ! getent hosts "$h" >/dev/null; do
if [ $t -ge %[2]d ]; then echo "torus: $h does not resolve after %[2]ds; starting anyway" >&2; break 2; fi
if [ $t -eq 0 ]; then echo "torus: waiting for the job's hosts to resolve ($h)" >&2; fi
t=$((t+1)); sleep 1
done
done
fi
`, HostfileKey, int(hostsResolveTimeout/time.Second), callBack)
		// The launcher's own line, when it runs ranks, is started by
		// mpirun itself, and no sshd listens there.
		fmt.Fprintf(&b, `if command -v ssh-keyscan >/dev/null; then
read -r _ kt _ < "$d/%[1]s"
read -r me < /proc/sys/kernel/hostname || me=
t=0
while read -r h rest || [ -n "$h" ]; do
h=${h%%%%:*}
if [ "${h%%%%.*}" = "$me" ]; then continue; fi
while [ -n "$h" ] && [ -z "$(ssh-keyscan -T 5 -t "$kt" -p %[2]d "$h" 2>/dev/null)" ]; do
if [ $t -ge %[4]d ]; then echo "torus: $h accepts no connection on port %[2]d after %[4]ds; starting anyway" >&2; break 2; fi
if [ $t -eq 0 ]; then echo "torus: waiting for the job's hosts to accept connections on port %[2]d ($h)" >&2; fi
t=$((t+1)); sleep 1
done
done < "$s/%[3]s"
fi
`, SSHKnownHosts, port, HostfileKey, int(hostsAcceptTimeout/time.Second))
	}
	// Only SSHSetupTools: images differ in what else they have.
	fmt.Fprintf(&b, `uid=$(id -u)
known=
while IFS=: read -r name pw id rest || [ -n "$name" ]; do
  if [ "$id" = "$uid" ]; then known=1; fi
done < %[1]s
{
  cat %[1]s
  if [ -z "$known" ]; then
    if [ -n "$(tail -c 1 %[1]s)" ]; then echo; fi
    printf '%[2]s:x:%%s:%%s:Torus MPI:%[3]s:/bin/sh\n' "$uid" "$(id -g)"
  fi
} > "$v/%[4]s"
chmod 0644 "$v/%[4]s"
`, PasswdPath, PasswdUser, sshPath, PasswdSubPath)
	return b.String()
}
