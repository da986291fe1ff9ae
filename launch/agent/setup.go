package agent

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

	"github.com/torus-mpi/torus/launch/cmdline"
)

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
	Files  []cmdline.File
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

// Wait is the launcher's wait for the hosts of its hostfile: until each
// resolves, then until each accepts a connection that proves it the job's
// host. The launcher starts with its workers, so a host may not resolve or
// may refuse connections for as long as its pod takes to start, image
// pull included: the wait is unbounded until Torus has seen every worker
// Ready (ReadyFile), and bounded by Timeout from then. Past its bound the
// wait says so and mpirun starts, to fail in its own words (a Ready
// worker that refuses the launcher is kept from it by the network).
type Wait struct {
	// Hostfile is read for host names (a line starts with the host,
	// "host slots=N" or "host:N"); CallBack, if set, must resolve too: the
	// launcher's own name through which Hydra's proxies connect back.
	Hostfile, CallBack string
	Port               int
	// Key and KnownHosts are file names in the SSH directory.
	Key, KnownHosts string
	// HostKeyOnly ends a host's wait once it presents the job's host key,
	// before logging in: OpenSSH's sshd lets in only the pod's own user,
	// whom the waiting container need not be. Otherwise the host must
	// accept the job's client key too.
	HostKeyOnly bool
	// ReadyFile, if set, is empty until every worker is Ready, as Torus
	// writes it through the downward API. Timeout counts from when it is
	// first seen written, or from the start without it.
	ReadyFile string
	Timeout   time.Duration
	// Quiet keeps the wait's reasons to itself until it has lasted this
	// long: waiting in the launcher's own container, ahead of the
	// program, a wait that ends as its workers start adds nothing to the
	// program's output. Giving up is always said.
	Quiet time.Duration
}

// waitInterval is the pause between two attempts on a host that is not
// there yet: one lookup or one connection each, cheap for the cluster's DNS
// and the host, and short beside a pod's start.
var waitInterval = 100 * time.Millisecond

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
		return s.Wait.Run(ctx, s.Dir, s.Log)
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
	link := filepath.Join(dir, cmdline.ClientName)
	_ = os.Remove(link)
	if err := os.Symlink(name, link); err != nil {
		return fmt.Errorf("installing %s: %w", cmdline.ClientName, err)
	}
	return nil
}

// Run is the launcher's wait (Wait), with the client key and known hosts
// in the SSH directory dir, saying what it waits for on log: the hosts
// one after another, as the slowest bounds it anyway.
func (w *Wait) Run(ctx context.Context, dir string, log io.Writer) error {
	hosts, err := hostfileHosts(w.Hostfile)
	if err != nil {
		return err
	}
	client, err := NewClient(filepath.Join(dir, w.Key), filepath.Join(dir, w.KnownHosts))
	if err != nil {
		return err
	}
	me, _ := os.Hostname()
	start := time.Now()
	say := func(format string, args ...any) {
		if log != nil {
			fmt.Fprintf(log, "torus: "+format+"\n", args...)
		}
	}
	// quiet drops what is said before the wait has lasted w.Quiet.
	quiet := func(format string, args ...any) {
		if time.Since(start) >= w.Quiet {
			say(format, args...)
		}
	}
	b := waitBound{file: w.ReadyFile, timeout: w.Timeout, start: start, log: quiet}
	type target struct {
		host string
		// connect: the host must accept a connection too, not only
		// resolve.
		connect bool
	}
	var targets []target
	if w.CallBack != "" {
		targets = append(targets, target{host: w.CallBack})
	}
	for _, h := range hosts {
		// The launcher's own line, when it runs ranks: mpirun starts those
		// itself, and nothing listens here.
		short, _, _ := strings.Cut(h, ".")
		targets = append(targets, target{host: h, connect: short != me})
	}
	for _, t := range targets {
		check := func() error {
			if _, err := net.DefaultResolver.LookupHost(ctx, t.host); err != nil {
				return err
			}
			if !t.connect {
				return nil
			}
			if w.HostKeyOnly {
				return client.CheckHostKey(t.host, w.Port, time.Second)
			}
			return client.Handshake(t.host, w.Port, time.Second)
		}
		// Each reason once: a host that is starting changes its answer
		// (not found, refused, reset) a few times.
		said := map[string]bool{}
		for {
			err := check()
			if err == nil {
				break
			}
			if msg := err.Error(); !said[msg] && time.Since(start) >= w.Quiet {
				if log != nil {
					fmt.Fprintf(log, "%s%s: %v\n", cmdline.Waiting, t.host, err)
				}
				said[msg] = true
			}
			if b.passed() {
				say("%s still fails (%v) %s after every worker was Ready; starting anyway", t.host, err, w.Timeout)
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(waitInterval):
			}
		}
	}
	return nil
}

// waitBound is Wait's bound.
type waitBound struct {
	file    string
	timeout time.Duration
	start   time.Time
	// ready is when the file was first seen written.
	ready time.Time
	log   func(format string, args ...any)
}

// passed reports whether the wait has lasted past its bound.
func (b *waitBound) passed() bool {
	if b.file == "" {
		return time.Since(b.start) > b.timeout
	}
	if b.ready.IsZero() {
		if data, err := os.ReadFile(b.file); err != nil || len(bytes.TrimSpace(data)) == 0 {
			return false
		}
		b.ready = time.Now()
		b.log("every worker is Ready; waiting at most %s more", b.timeout)
	}
	return time.Since(b.ready) > b.timeout
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

// errHostKeyChecked ends CheckHostKey's key exchange once the host's key is
// the job's.
var errHostKeyChecked = errors.New("the job's host key")

// CheckHostKey connects to host and hangs up once it has presented the
// job's host key, as ssh-keyscan does, without logging in.
func (c *Client) CheckHostKey(host string, port int, timeout time.Duration) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return dialError(host, port, err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(timeout))
	config := &ssh.ClientConfig{
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			if err := c.checkHostKey(hostname, remote, key); err != nil {
				return err
			}
			return errHostKeyChecked
		},
	}
	_, _, _, err = ssh.NewClientConn(nc, addr, config)
	if errors.Is(err, errHostKeyChecked) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%s port %d let the wait in without a key", host, port)
	}
	return fmt.Errorf("%s port %d: %w", host, port, err)
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
