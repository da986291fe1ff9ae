package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/torus-mpi/torus/launch/cmdline"
)

// ExitFailure is ssh's exit code for its own errors: a connection that
// fails or is lost, a host key or client key refused, a bad command line.
const ExitFailure = 255

// Defaults for what the command line does not set. ssh tries once; the
// job's ssh configuration tries 10 times, as workers' addresses may take
// seconds to be admitted by network policies.
const (
	defaultPort               = 22
	defaultConnectionAttempts = 10
)

// retryDelay is the pause between connection attempts, ssh's own.
var retryDelay = time.Second

// Client runs commands on the job's hosts, the way launchers run ssh.
type Client struct {
	// Key is the job's client key.
	Key ssh.Signer
	// HostKeys are the keys a host may present: the job's host key.
	HostKeys []ssh.PublicKey
	// Port is the port where the command line names none (22 if zero).
	Port int

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Signals received are sent on to the remote command. Only
	// signals the SSH protocol names are.
	Signals <-chan os.Signal
	// LostHosts is the directory where Run notes a host whose agent
	// stopped its command, or whose connection was lost before the
	// command ended (EnvLostHosts); none are noted if empty.
	LostHosts string
	// AliveInterval is how often Run asks a host whether it is still
	// there while its command runs, and AliveCountMax how many asks may
	// go unanswered before Run gives the host up as lost, as OpenSSH's
	// ServerAliveInterval and ServerAliveCountMax do (DefaultAliveInterval
	// and DefaultAliveCountMax if zero). A node that dies sends nothing:
	// without them a launcher would learn of it only from TCP's own
	// timeouts, up to a quarter of an hour later.
	AliveInterval time.Duration
	AliveCountMax int
}

// Defaults of Client.AliveInterval and Client.AliveCountMax: a host
// silent for 45 s is lost.
const (
	DefaultAliveInterval = 15 * time.Second
	DefaultAliveCountMax = 3
)

// NewClient reads the client's private key and the hosts' public keys
// (ParseHostKeys) from files.
func NewClient(keyFile, hostKeyFile string) (*Client, error) {
	if keyFile == "" || hostKeyFile == "" {
		return nil, fmt.Errorf("the client key and the known hosts are both needed (%s, %s)", cmdline.EnvKey, cmdline.EnvKnownHosts)
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the client key: %w", err)
	}
	key, err := ssh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("parsing the client key %s: %w", keyFile, err)
	}
	if data, err = os.ReadFile(hostKeyFile); err != nil {
		return nil, fmt.Errorf("reading the host key: %w", err)
	}
	hostKeys, err := ParseHostKeys(data)
	if err != nil {
		return nil, fmt.Errorf("parsing the host key %s: %w", hostKeyFile, err)
	}
	return &Client{Key: key, HostKeys: hostKeys}, nil
}

// Run runs an ssh command line and returns the exit code ssh would: the
// remote command's, 128+n for a command killed by signal n, ExitFailure
// for the client's own errors, which it writes to Stderr.
func (c *Client) Run(args []string) int {
	cmd, err := ParseArgs(args)
	if err != nil {
		return c.fail("%v", err)
	}
	conn, err := c.connect(cmd)
	if err != nil {
		return c.fail("%v", err)
	}
	defer conn.Close()
	sess, err := conn.NewSession()
	if err != nil {
		return c.fail("%s: opening a session: %v", cmd.Host, err)
	}
	defer sess.Close()
	if !cmd.NoStdin {
		sess.Stdin = c.Stdin
	}
	sess.Stdout, sess.Stderr = c.Stdout, c.Stderr
	if err := sess.Start(cmd.Command); err != nil {
		return c.fail("%s: running the command: %v", cmd.Host, err)
	}
	done := make(chan struct{})
	defer close(done)
	silent := make(chan struct{})
	go c.keepAlive(conn, done, silent)
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-c.Signals:
				if s, ok := sig.(syscall.Signal); ok {
					if name, ok := signalName(s); ok {
						_ = sess.Signal(ssh.Signal(name))
					}
				}
			}
		}
	}()
	err = sess.Wait()
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.Signal() == "TERM" && exit.Msg() == StoppedMessage {
			noteLost(c.LostHosts, cmd.Host, "its pod was stopped while it ran the job")
		}
		// 128+n when the command was killed by signal n.
		return exit.ExitStatus()
	}
	// The command's end never came: its host, or the way to it, is gone.
	select {
	case <-silent:
		err = fmt.Errorf("no answer for %s", c.aliveInterval()*time.Duration(c.aliveCountMax()))
	default:
	}
	noteLost(c.LostHosts, cmd.Host, fmt.Sprintf("the connection was lost while it ran the job (%v)", err))
	return c.fail("%s: %v", cmd.Host, err)
}

func (c *Client) aliveInterval() time.Duration {
	return orDefault(c.AliveInterval, DefaultAliveInterval)
}
func (c *Client) aliveCountMax() int { return orDefault(c.AliveCountMax, DefaultAliveCountMax) }

// keepAlive asks the host every AliveInterval whether it is there, one ask
// at a time, until done; after AliveCountMax intervals without an answer
// it closes the connection, which ends the session's wait, and closes
// silent. The agent answers every global request (it refuses them).
func (c *Client) keepAlive(conn *ssh.Client, done <-chan struct{}, silent chan<- struct{}) {
	tick := time.NewTicker(c.aliveInterval())
	defer tick.Stop()
	answers := make(chan error, 1)
	asking, missed := false, 0
	for {
		select {
		case <-done:
			return
		case err := <-answers:
			asking, missed = false, 0
			if err != nil {
				return // the connection is gone: the wait says so
			}
		case <-tick.C:
			if asking {
				if missed++; missed >= c.aliveCountMax() {
					close(silent)
					conn.Close()
					return
				}
				continue
			}
			asking = true
			go func() {
				_, _, err := conn.SendRequest("keepalive@openssh.com", true, nil)
				answers <- err
			}()
		}
	}
}

func (c *Client) fail(format string, args ...any) int {
	fmt.Fprintf(c.Stderr, "torus-ssh: "+format+"\n", args...)
	return ExitFailure
}

// connect dials the host, up to the attempts asked for, then logs in.
func (c *Client) connect(cmd Command) (*ssh.Client, error) {
	port := cmd.Port
	if port == 0 {
		port = c.Port
	}
	if port == 0 {
		port = defaultPort
	}
	attempts := cmd.ConnectionAttempts
	if attempts == 0 {
		attempts = defaultConnectionAttempts
	}
	addr := net.JoinHostPort(cmd.Host, strconv.Itoa(port))
	var nc net.Conn
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			// A signal here is the launcher giving up: nothing runs
			// remotely yet to pass it on to.
			select {
			case sig := <-c.Signals:
				return nil, fmt.Errorf("connect to host %s port %d: interrupted by %v", cmd.Host, port, sig)
			case <-time.After(retryDelay):
			}
		}
		if nc, err = net.DialTimeout("tcp", addr, cmd.ConnectTimeout); err == nil {
			break
		}
	}
	if err != nil {
		return nil, dialError(cmd.Host, port, err)
	}
	user := cmd.User
	if user == "" {
		// The server runs commands as its own user whatever the name.
		user = os.Getenv("USER")
	}
	config := &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(c.Key)},
		HostKeyCallback: c.checkHostKey,
	}
	if cmd.ConnectTimeout > 0 {
		_ = nc.SetDeadline(time.Now().Add(cmd.ConnectTimeout))
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, addr, config)
	if err != nil {
		nc.Close()
		var hostKey *hostKeyError
		switch {
		case errors.As(err, &hostKey):
			return nil, sshError(hostKey.Error() + "\nHost key verification failed.")
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, sshError(fmt.Sprintf("%s@%s: Permission denied (publickey).", user, cmd.Host))
		}
		return nil, fmt.Errorf("%s port %d: %w", cmd.Host, port, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// hostKeyError is a host presenting a key that is not the job's.
type hostKeyError struct {
	host string
	key  ssh.PublicKey
}

func (e *hostKeyError) Error() string {
	return fmt.Sprintf("%s presents %s key %s, which is not the job's host key", e.host, e.key.Type(), ssh.FingerprintSHA256(e.key))
}

func (c *Client) checkHostKey(host string, _ net.Addr, key ssh.PublicKey) error {
	for _, k := range c.HostKeys {
		if bytes.Equal(k.Marshal(), key.Marshal()) {
			return nil
		}
	}
	return &hostKeyError{host: host, key: key}
}

// sshError is a failure in OpenSSH's own words, which MPI launchers pass on
// and Torus's diagnosis reads, whichever client a job uses.
type sshError string

func (e sshError) Error() string { return string(e) }

// dialError says why a connection failed in OpenSSH's words, which MPI
// launchers pass on and Torus's diagnosis reads, whichever client a job
// uses.
func dialError(host string, port int, err error) error {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		what := "Name or service not known"
		if dns.IsTemporary || dns.IsTimeout {
			what = "Temporary failure in name resolution"
		}
		return sshError(fmt.Sprintf("Could not resolve hostname %s: %s", host, what))
	}
	what := err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		what = "Connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH):
		what = "No route to host"
	case errors.Is(err, syscall.ENETUNREACH):
		what = "Network is unreachable"
	case errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, os.ErrDeadlineExceeded):
		what = "Connection timed out"
	default:
		var timeout interface{ Timeout() bool }
		if errors.As(err, &timeout) && timeout.Timeout() {
			what = "Connection timed out"
		}
	}
	return fmt.Errorf("connect to host %s port %d: %s", host, port, what)
}
