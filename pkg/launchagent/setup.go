package launchagent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHClientName is the name the client is installed under: run by that
// name, the binary is the ssh launchers call.
const SSHClientName = "torus-ssh"

// SetupFile is one file the setup copies from the job's Secret.
type SetupFile struct {
	// Key is the Secret's key; Name, the file's name in the SSH directory.
	Key, Name string
	Mode      os.FileMode
	// Keyed files come in two generations: a pod of a later run than the
	// Secret's current keys are for takes the next ones.
	Keyed bool
}

// Setup prepares a pod for remote launch, in place of OpenSSH's set-up: it
// runs first in the pod, as the pod's user, from Torus's own image.
type Setup struct {
	// SecretDir is where the job's SSH Secret is mounted; Dir, the SSH
	// directory to fill, which the other containers mount.
	SecretDir, Dir string
	// RunKey is the Secret's key holding the run its current keys are for;
	// NextPrefix prefixes the keys of the run after it.
	RunKey, NextPrefix string
	// PodRun is this pod's run (the JobSet's restart attempt).
	PodRun int
	Files  []SetupFile
	// Link links each file to the Secret's instead of copying it: the
	// pod's other containers, which mount the Secret too, may run as
	// another user than this one (each image's own), and read the keys
	// where the kubelet put them.
	Link bool
	// InstallDir, if set, receives this binary and its client name, for
	// the other containers to run.
	InstallDir string
	// Wait, on the launcher, holds mpirun back until every host it needs
	// answers as the job's agent.
	Wait *Wait
	Log  io.Writer
}

// Wait is the launcher's wait for the hosts of its hostfile: first until
// each resolves, then until each accepts the job's client key and presents
// the job's host key. Neither gives up with an error: past its bound the
// wait says so and mpirun starts, to fail in its own words.
type Wait struct {
	// Hostfile is read for host names (a line starts with the host,
	// "host slots=N" or "host:N"); CallBack, if set, must resolve too: the
	// launcher's own name through which Hydra's proxies connect back.
	Hostfile, CallBack string
	Port               int
	// Key and KnownHosts are file names in the SSH directory.
	Key, KnownHosts               string
	ResolveTimeout, AcceptTimeout time.Duration
}

// Run copies the keys, installs the binary and waits, in that order.
func (s *Setup) Run(ctx context.Context) error {
	if err := s.copyKeys(); err != nil {
		return err
	}
	if s.InstallDir != "" {
		if err := install(s.InstallDir); err != nil {
			return err
		}
	}
	if s.Wait != nil {
		return s.wait(ctx)
	}
	return nil
}

// copyKeys writes the run's generation of each file as the pod user's own,
// in a directory only that user may read, or links it (Link).
func (s *Setup) copyKeys() error {
	mode := os.FileMode(0o700)
	if s.Link {
		// Links only: the other containers' user must pass through.
		mode = 0o755
	}
	if err := os.MkdirAll(s.Dir, mode); err != nil {
		return err
	}
	if err := os.Chmod(s.Dir, mode); err != nil {
		return err
	}
	prefix := ""
	current, err := os.ReadFile(filepath.Join(s.SecretDir, s.RunKey))
	if err != nil {
		return fmt.Errorf("reading the keys' run: %w", err)
	}
	run, err := strconv.Atoi(strings.TrimSpace(string(current)))
	if err != nil {
		return fmt.Errorf("the keys' run %q: %w", current, err)
	}
	if s.PodRun > run {
		prefix = s.NextPrefix
	}
	for _, f := range s.Files {
		key := f.Key
		if f.Keyed {
			key = prefix + key
		}
		src := filepath.Join(s.SecretDir, key)
		if s.Link {
			if _, err := os.Stat(src); err != nil {
				return fmt.Errorf("the job's %s: %w", key, err)
			}
			dst := filepath.Join(s.Dir, f.Name)
			if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if err := os.Symlink(src, dst); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("reading the job's %s: %w", key, err)
		}
		if err := writeFile(filepath.Join(s.Dir, f.Name), data, f.Mode); err != nil {
			return err
		}
	}
	return nil
}

// writeFile replaces a file atomically: a setup cut short and run again
// finds no half-written key.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// install copies the running binary into dir, with its client name beside
// it as a link.
func install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return fmt.Errorf("reading this binary: %w", err)
	}
	name := filepath.Base(self)
	if err := writeFile(filepath.Join(dir, name), data, 0o755); err != nil {
		return fmt.Errorf("installing %s: %w", name, err)
	}
	link := filepath.Join(dir, SSHClientName)
	_ = os.Remove(link)
	if err := os.Symlink(name, link); err != nil {
		return fmt.Errorf("installing %s: %w", SSHClientName, err)
	}
	return nil
}

func (s *Setup) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, "torus: "+format+"\n", args...)
	}
}

// wait is the launcher's wait (Wait).
func (s *Setup) wait(ctx context.Context) error {
	w := s.Wait
	hosts, err := hostfileHosts(w.Hostfile)
	if err != nil {
		return err
	}
	names := hosts
	if w.CallBack != "" {
		names = append([]string{w.CallBack}, hosts...)
	}
	deadline := time.Now().Add(w.ResolveTimeout)
	said := false
	for _, h := range names {
		resolves := func() bool {
			_, err := net.DefaultResolver.LookupHost(ctx, h)
			if err != nil && !said {
				s.logf("waiting for the job's hosts to resolve (%s)", h)
				said = true
			}
			return err == nil
		}
		if !s.until(ctx, deadline, resolves) {
			s.logf("%s does not resolve after %s; starting anyway", h, w.ResolveTimeout)
			return nil
		}
	}
	client, err := NewClient(filepath.Join(s.Dir, w.Key), filepath.Join(s.Dir, w.KnownHosts))
	if err != nil {
		return err
	}
	me, _ := os.Hostname()
	deadline = time.Now().Add(w.AcceptTimeout)
	said = false
	for _, h := range hosts {
		if short, _, _ := strings.Cut(h, "."); short == me {
			// The launcher's own line, when it runs ranks: mpirun starts
			// those itself, and nothing listens here.
			continue
		}
		var last error
		accepts := func() bool {
			last = client.Handshake(h, w.Port, time.Second)
			if last != nil && !said {
				s.logf("waiting for the job's hosts to accept the job's key on port %d (%s)", w.Port, h)
				said = true
			}
			return last == nil
		}
		if !s.until(ctx, deadline, accepts) {
			s.logf("%s does not accept the job's key on port %d after %s (%v); starting anyway", h, w.Port, w.AcceptTimeout, last)
			return nil
		}
	}
	return nil
}

// until calls ok every 200ms until it holds or the deadline passes.
func (s *Setup) until(ctx context.Context, deadline time.Time, ok func() bool) bool {
	for !ok() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return true
}

// hostfileHosts reads the host of each line of a hostfile.
func hostfileHosts(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the hostfile: %w", err)
	}
	var hosts []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		h, _, _ := strings.Cut(f[0], ":")
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, errors.New("the hostfile names no host")
	}
	return hosts, nil
}

// Handshake connects to host and logs in, proving that it presents the
// job's host key and accepts the job's client key, then hangs up.
func (c *Client) Handshake(host string, port int, timeout time.Duration) error {
	conn, err := c.connect(Command{Host: host, Port: port, ConnectTimeout: timeout, ConnectionAttempts: 1})
	if err != nil {
		return err
	}
	return conn.Close()
}

// ParseHostKeys reads the keys of a known_hosts file, or of an
// authorized_keys file (as ssh-keygen writes .pub files). Every host of a
// job presents the job's host key, so the keys are trusted for any of its
// hosts; a revoked key is refused.
func ParseHostKeys(data []byte) ([]ssh.PublicKey, error) {
	if keys, err := ParseAuthorizedKeys(data); err == nil {
		return keys, nil
	}
	var keys []ssh.PublicKey
	for len(bytes.TrimSpace(data)) > 0 {
		marker, _, key, _, rest, err := ssh.ParseKnownHosts(data)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if marker == "" {
			keys = append(keys, key)
		}
		data = rest
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	return keys, nil
}
