package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Component is a process that serves on ports it is handed.
type Component struct {
	Name string
	// Ports is how many ports the component binds; Command and Ready get
	// them in that order.
	Ports int
	// Optional is how many of the last ports the component may leave
	// unbound: servers it starts only with a feature enabled.
	Optional int
	// Command returns the process to run on these ports. It may write
	// files or objects that name them (configuration, webhook
	// configurations): it is called again with new ports on a restart.
	Command func(ctx context.Context, ports []int) (Spec, error)
	// Ready returns nil once the component serves (a health endpoint, a
	// webhook answering). It is polled while the process runs.
	Ready func(ctx context.Context, ports []int) error
	// Timeout bounds the wait for Ready; 60 s when zero.
	Timeout time.Duration
}

// Supervisor starts components.
type Supervisor struct {
	Ports *Ports
	// LogDir holds <name>.log for each component; an earlier attempt's log
	// is kept as <name>.attempt-N.log.
	LogDir string
	// PIDDir, when set, gets <name>.pid as soon as a component starts, so
	// that another run can stop it (test/localcluster down).
	PIDDir string
	// Detach: components outlive this program (see Spec.Detach).
	Detach bool
	// Attempts is how often a component that could not bind a port is
	// started on other ports; 3 when zero.
	Attempts int
	// Logf reports restarts; nil is silent.
	Logf func(format string, args ...any)
}

// StartError is a component that did not start: it exited, or was not
// ready in time. It names the component and shows the end of its log.
type StartError struct {
	Name   string
	Reason string
	Log    string
	Tail   string
	// bind: it could not bind one of its ports.
	bind bool
}

func (e *StartError) Error() string {
	return fmt.Sprintf("%s %s; last lines of %s:\n%s", e.Name, e.Reason, e.Log, e.Tail)
}

// tailLines is how much of a log a StartError shows.
const tailLines = 15

// bindFailure is what every component of ours (Go's net package, etcd,
// the Kubernetes servers) logs when a port is taken.
const bindFailure = "address already in use"

// Run starts c and returns once it is ready and listens on every port it
// was given, with the ports. A component that exits or is not ready in
// time is stopped, and the error says why with the end of its log; one
// that could not bind is started again on other ports.
func (s *Supervisor) Run(ctx context.Context, c Component) (*Process, []int, error) {
	if c.Optional < 0 || c.Optional > c.Ports {
		return nil, nil, fmt.Errorf("%s: %d optional ports of %d", c.Name, c.Optional, c.Ports)
	}
	attempts := s.Attempts
	if attempts == 0 {
		attempts = 3
	}
	log := filepath.Join(s.LogDir, c.Name+".log")
	for attempt := 1; ; attempt++ {
		ports, err := s.Ports.TakeN(c.Ports)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		spec, err := c.Command(ctx, ports)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		spec.Name, spec.Log, spec.Detach = c.Name, log, s.Detach
		p, err := Start(spec)
		if err != nil {
			return nil, nil, err
		}
		pidFile := ""
		if s.PIDDir != "" {
			pidFile = filepath.Join(s.PIDDir, c.Name+".pid")
			if err := WritePIDFile(pidFile, p.PID()); err != nil {
				p.Stop()
				return nil, nil, fmt.Errorf("%s: %w", c.Name, err)
			}
		}
		err = s.waitReady(ctx, c, p, ports)
		if err == nil {
			return p, ports, nil
		}
		p.Stop()
		if pidFile != "" {
			_ = os.Remove(pidFile)
		}
		var se *StartError
		if !errors.As(err, &se) || !se.bind || attempt == attempts {
			return nil, nil, err
		}
		kept := filepath.Join(s.LogDir, fmt.Sprintf("%s.attempt-%d.log", c.Name, attempt))
		_ = os.Rename(log, kept)
		if s.Logf != nil {
			s.Logf("%s could not bind one of ports %v (log: %s); restarting it on other ports", c.Name, ports, kept)
		}
	}
}

func (s *Supervisor) waitReady(ctx context.Context, c Component, p *Process, ports []int) error {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fail := func(reason string, bind bool) error {
		return &StartError{Name: c.Name, Reason: reason, Log: p.Log, Tail: Tail(p.Log, tailLines), bind: bind}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last, lastFound error
	for {
		if p.Exited() {
			bind := len(ports) > 0 && logContains(p.Log, bindFailure)
			return fail(fmt.Sprintf("exited during start-up (%v)", p.ExitError()), bind)
		}
		if last = c.Ready(ctx, ports); last == nil {
			addrs, err := Listeners(p.PID())
			if err != nil {
				return fmt.Errorf("%s: reading its listening sockets: %w", c.Name, err)
			}
			if missing := missingPorts(addrs, ports[:len(ports)-c.Optional]); len(missing) > 0 {
				last = fmt.Errorf("ready, but not listening on port(s) %v it was given", missing)
			}
		}
		if last != nil && len(ports) > 0 && logContains(p.Log, bindFailure) {
			// Some servers log a failed bind and carry on without it.
			return fail("could not bind a port ("+bindFailure+")", true)
		}
		if last == nil {
			return nil
		}
		// The check cut short by the deadline says nothing: report what
		// the one before it found.
		if ctx.Err() == nil || lastFound == nil {
			lastFound = last
		}
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fail(fmt.Sprintf("not ready after %s: %v", timeout, lastFound), false)
		case <-p.Done():
		case <-tick.C:
		}
	}
}
