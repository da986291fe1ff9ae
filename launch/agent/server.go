package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// DefaultKillGrace is how long a command's process group has to exit after
// SIGTERM, once its client has gone, before it gets SIGKILL.
const DefaultKillGrace = 5 * time.Second

// signals are the signals the SSH protocol names (RFC 4254 section 6.10).
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
	"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

func signalName(sig syscall.Signal) (string, bool) {
	for name, s := range signals {
		if s == sig {
			return name, true
		}
	}
	return "", false
}

// Server runs the commands of clients holding the job's client key.
type Server struct {
	config *ssh.ServerConfig
	// KillGrace is the time between SIGTERM and SIGKILL when a client
	// goes away before its command ends (DefaultKillGrace if zero).
	KillGrace time.Duration
	// Log receives connection and session errors (log's standard logger
	// if nil).
	Log *log.Logger
	// MaxStartups is how many connections may be in their handshake at
	// once, and PerSourceMaxStartups how many of them from one IP
	// address; a connection beyond either is closed as it is accepted.
	// Authenticated connections count against neither.
	// (DefaultMaxStartups and DefaultPerSourceMaxStartups if zero.)
	MaxStartups, PerSourceMaxStartups int
	// LoginGraceTime is how long a connection has to authenticate before
	// it is closed (DefaultLoginGraceTime if zero).
	LoginGraceTime time.Duration

	mu sync.Mutex
	// running are the commands that have not exited, for Shutdown.
	running map[*process]struct{}
	// stopping: Shutdown was called; no command starts any more.
	stopping bool
	// interrupted counts the commands Shutdown stopped.
	interrupted int
}

// NewServer makes a server presenting hostKey (a PEM private key) and
// letting in only the keys of authorizedKeys (an authorized_keys file: the
// job's one client key). The user name clients give is not checked:
// commands run as the agent's own user whatever it is.
func NewServer(hostKey, authorizedKeys []byte) (*Server, error) {
	signer, err := ssh.ParsePrivateKey(hostKey)
	if err != nil {
		return nil, fmt.Errorf("parsing the host key: %w", err)
	}
	keys, err := ParseAuthorizedKeys(authorizedKeys)
	if err != nil {
		return nil, fmt.Errorf("parsing the authorized keys: %w", err)
	}
	s := &Server{}
	s.config = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			for _, k := range keys {
				if bytes.Equal(k.Marshal(), key.Marshal()) {
					return nil, nil
				}
			}
			return nil, fmt.Errorf("%s key %s is not authorized", key.Type(), ssh.FingerprintSHA256(key))
		},
	}
	s.config.AddHostKey(signer)
	return s, nil
}

// ParseAuthorizedKeys reads the keys of an authorized_keys file (also the
// format of a .pub file); options and comments are ignored.
func ParseAuthorizedKeys(data []byte) ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	for len(bytes.TrimSpace(data)) > 0 {
		key, _, _, rest, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
		data = rest
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	return keys, nil
}

func (s *Server) logf(format string, args ...any) {
	if s.Log != nil {
		s.Log.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// Serve accepts connections on l until it fails (as when l is closed). The
// limits on unauthenticated connections are read as it starts.
func (s *Server) Serve(l net.Listener) error {
	g := newStartups(orDefault(s.MaxStartups, DefaultMaxStartups), orDefault(s.PerSourceMaxStartups, DefaultPerSourceMaxStartups))
	var refused int
	var lastLog time.Time
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		source := sourceOf(c.RemoteAddr())
		if !g.acquire(source) {
			// Closed before a byte is read or a buffer allocated, as
			// sshd drops connections beyond MaxStartups.
			c.Close()
			if refused++; time.Since(lastLog) >= refusalLogInterval {
				s.logf("%s: refused: at most %d connections may be authenticating at once, %d from one address (%d refused since the last such line)",
					c.RemoteAddr(), g.max, g.perSource, refused)
				refused, lastLog = 0, time.Now()
			}
			continue
		}
		go s.serveConn(c, func() { g.release(source) })
	}
}

// serveConn serves a connection that holds a slot of the unauthenticated
// ones, which it gives back by calling handshakeDone once its handshake is
// over, whether the peer authenticated or not.
func (s *Server) serveConn(c net.Conn, handshakeDone func()) {
	defer c.Close()
	// The deadline bounds the whole handshake, however the peer paces
	// its bytes; it is lifted once the peer holds the job's key, so that
	// a rank's session lasts as long as the rank.
	grace := orDefault(s.LoginGraceTime, DefaultLoginGraceTime)
	_ = c.SetDeadline(time.Now().Add(grace))
	conn, chans, reqs, err := ssh.NewServerConn(c, s.config)
	handshakeDone()
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		// A connection closed before the handshake is a TCP probe (the
		// kubelet's, the launcher's wait for workers): not worth a line.
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.logf("%s: not authenticated within %s", c.RemoteAddr(), grace)
		return
	default:
		s.logf("%s: %v", c.RemoteAddr(), err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	defer conn.Close()
	// Global requests are port forwarding and keepalives: all refused.
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.Prohibited, "only sessions are served")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			s.logf("%s: accepting a session: %v", c.RemoteAddr(), err)
			continue
		}
		go s.session(ch, creqs)
	}
}

// session serves one channel: env requests, then one exec. The channel's
// requests end when the client closes it or the connection is lost; a
// command still running then is stopped.
func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	var env []string
	var p *process
	for req := range reqs {
		ok := false
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if p == nil && ssh.Unmarshal(req.Payload, &kv) == nil {
				env = append(env, kv.Name+"="+kv.Value)
				ok = true
			}
		case "exec":
			var cmd struct{ Command string }
			if p != nil || ssh.Unmarshal(req.Payload, &cmd) != nil {
				break
			}
			var err error
			if p, err = s.start(cmd.Command, env, ch); err != nil {
				s.logf("starting %q: %v", cmd.Command, err)
				break
			}
			ok = true
		case "signal":
			var sig struct{ Signal string }
			if p != nil && ssh.Unmarshal(req.Payload, &sig) == nil {
				if n, known := signals[sig.Signal]; known {
					p.signal(n)
					ok = true
				}
			}
		}
		// Anything else (shell, pty-req, subsystem, x11-req, agent
		// forwarding) is refused.
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
		// Only once exec has its reply may the channel close.
		if req.Type == "exec" && ok {
			go func(p *process) {
				state := p.wait()
				s.finish(ch, state, s.forget(p))
			}(p)
		}
	}
	if p == nil {
		ch.Close()
		return
	}
	p.stop(s.killGrace())
}

func (s *Server) killGrace() time.Duration {
	return orDefault(s.KillGrace, DefaultKillGrace)
}

// orDefault is v, or def where v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// finish reports how a command ended, as sshd does, and closes its channel.
// A command Shutdown stopped ends with exit-signal TERM and StoppedMessage,
// however it exited: the client tells the loss of its host from a failure
// of the program by that message (ExitError.Msg).
func (s *Server) finish(ch ssh.Channel, state *os.ProcessState, stopped bool) {
	_ = ch.CloseWrite()
	ws, _ := state.Sys().(syscall.WaitStatus)
	if stopped {
		msg := struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{Signal: "TERM", Error: StoppedMessage}
		_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(&msg))
	} else if name, ok := signalName(ws.Signal()); ws.Signaled() && ok {
		msg := struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{Signal: name, CoreDumped: ws.CoreDump()}
		_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(&msg))
	} else {
		status := struct{ Status uint32 }{uint32(state.ExitCode())}
		if ws.Signaled() {
			status.Status = 128 + uint32(ws.Signal())
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(&status))
	}
	ch.Close()
}

// process is a command running in its own process group.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	// stopped: Shutdown sent it SIGTERM (under Server.mu).
	stopped bool
}

// start runs a client's command and counts it running, unless the server
// is shutting down.
func (s *Server) start(command string, env []string, ch ssh.Channel) (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, errors.New("the agent is stopping")
	}
	p, err := start(command, env, ch)
	if err != nil {
		return nil, err
	}
	if s.running == nil {
		s.running = map[*process]struct{}{}
	}
	s.running[p] = struct{}{}
	return p, nil
}

// forget counts p's command ended, and reports whether Shutdown had
// stopped it.
func (s *Server) forget(p *process) (stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, p)
	return p.stopped
}

// Interrupted reports whether Shutdown stopped commands that were running:
// the work of the job that sent them was cut short, unlike a pod stopped
// once its launcher has finished.
func (s *Server) Interrupted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.interrupted > 0
}

// Shutdown stops the server's commands as a pod being stopped must: no
// command starts any more, every running command's process group gets
// SIGTERM at once, and Shutdown returns when every group has exited, so
// that ranks have the pod's whole grace period to write a checkpoint. If
// ctx ends first, what is left gets SIGKILL. Listeners are the caller's to
// close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	groups := make([]int, 0, len(s.running))
	for p := range s.running {
		p.stopped = true
		groups = append(groups, p.cmd.Process.Pid)
	}
	s.interrupted += len(groups)
	s.mu.Unlock()
	for _, pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// A group is gone once no process is left in it: its leader is
		// reaped by wait, the orphans it left by the container's init.
		groups = slices.DeleteFunc(groups, func(pgid int) bool { return syscall.Kill(-pgid, 0) == syscall.ESRCH })
		if len(groups) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			for _, pgid := range groups {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return fmt.Errorf("%d commands still ran when the shutdown's time ran out; killed: %w", len(groups), ctx.Err())
		case <-tick.C:
		}
	}
}

// start runs command with /bin/sh, as sshd does, in a process group of its
// own so that signals and the final kill reach every process it starts.
// Its environment is the agent's plus the client's env requests. Its
// working directory is $HOME, as under sshd, where that exists.
func start(command string, env []string, ch ssh.Channel) (*process, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), env...)
	if home := os.Getenv("HOME"); home != "" {
		if fi, err := os.Stat(home); err == nil && fi.IsDir() {
			cmd.Dir = home
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	// A pipe rather than cmd.Stdin = ch: Wait would wait for the client's
	// end of input, which a client that sends none never gives.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	return &process{cmd: cmd, done: make(chan struct{})}, nil
}

// wait returns once the command has exited and its output is all sent.
func (p *process) wait() *os.ProcessState {
	_ = p.cmd.Wait()
	close(p.done)
	return p.cmd.ProcessState
}

func (p *process) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// stop ends the command's process group if the command still runs: SIGTERM,
// then SIGKILL to whatever is left after grace. A command that ended on its
// own is left alone, like anything it left running, as under sshd.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		// The group is gone once no process is left in it (the leader is
		// reaped by wait).
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
