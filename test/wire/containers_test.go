package wire_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// runInitContainers runs a pod's init containers in order, each to success.
// The operator's mpi-ssh-setup must be among them: it is what makes the SSH
// directory.
func (c *cluster) runInitContainers(ctx context.Context, p *pod) error {
	found := false
	for _, ctr := range p.spec.InitContainers {
		found = found || ctr.Name == mpi.SSHInitContainer
	}
	if !found {
		return fmt.Errorf("the operator gave %s no %s init container", p.hostname, mpi.SSHInitContainer)
	}
	for i := range p.spec.InitContainers {
		ctr := &p.spec.InitContainers[i]
		argv, what, err := p.argv(ctr, process(ctr))
		if err != nil {
			return err
		}
		if out, err := run(ctx, what, initTimeout, nil, argv...); err != nil {
			return fmt.Errorf("init container %s of %s failed: %w\n%s", ctr.Name, p.hostname, err, out)
		}
	}
	return nil
}

// start runs a pod's main container in the background; its output goes to
// GinkgoWriter, which shows it when a spec fails.
func (c *cluster) start(p *pod) error {
	return c.startWith(p, nil)
}

// startWith starts a pod's main container with another command line, as
// another image's entrypoint would run; nil keeps the container's.
func (c *cluster) startWith(p *pod, entrypoint []string) error {
	ctr, err := mainContainer(p.spec)
	if err != nil {
		return err
	}
	if entrypoint == nil {
		entrypoint = process(ctr)
	}
	argv, what, err := p.argv(ctr, entrypoint)
	if err != nil {
		return err
	}
	fmt.Fprintf(GinkgoWriter, "$ %s &\n", what)
	ctx, cancel := context.WithCancel(c.ctx)
	cmd := command(ctx, nil, argv...)
	out := &prefixWriter{prefix: "[" + p.hostname + "] "}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		return fmt.Errorf("starting container %s of %s: %w", ctr.Name, p.hostname, err)
	}
	r := &running{cancel: cancel, exited: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	c.procs[p] = r
	return nil
}

// kill stops a pod's main container and waits until it is gone.
func (c *cluster) kill(p *pod) {
	r, ok := c.procs[p]
	if !ok {
		return
	}
	r.cancel()
	<-r.exited
	delete(c.procs, p)
}

// waitReady probes a worker as its startup (or readiness) probe says,
// from the launcher's network namespace.
func (c *cluster) waitReady(ctx context.Context, p *pod) error {
	ctr, err := mainContainer(p.spec)
	if err != nil {
		return err
	}
	probe := ctr.StartupProbe
	if probe == nil {
		probe = ctr.ReadinessProbe
	}
	if probe == nil || probe.TCPSocket == nil {
		return fmt.Errorf("container %s of %s has no TCP startup or readiness probe to wait for", ctr.Name, p.hostname)
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		err := dialIn(ctx, c.launcher.netns, p.address, probe.TCPSocket.Port.IntValue())
		if err == nil {
			return nil
		}
		if r, ok := c.procs[p]; ok {
			select {
			case <-r.exited:
				return fmt.Errorf("container %s of %s exited before it was ready: %v", ctr.Name, p.hostname, r.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", p.hostname, readyTimeout, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restart kills a worker's main container and starts it again, as the
// kubelet restarts a container, and waits until it is ready.
func (c *cluster) restart(ctx context.Context, p *pod) error {
	return c.restartWith(ctx, p, nil)
}

// restartWith restarts a worker's main container with another command line
// (nil: its own).
func (c *cluster) restartWith(ctx context.Context, p *pod, entrypoint []string) error {
	c.kill(p)
	if err := c.startWith(p, entrypoint); err != nil {
		return err
	}
	return c.waitReady(ctx, p)
}

// launch runs the launcher's main container to completion, for at most
// timeout.
func (c *cluster) launch(ctx context.Context, timeout time.Duration) (string, error) {
	ctr, err := mainContainer(c.launcher.spec)
	if err != nil {
		return "", err
	}
	argv, what, err := c.launcher.argv(ctr, process(ctr))
	if err != nil {
		return "", err
	}
	return run(ctx, what, timeout, nil, argv...)
}

// exec runs a command in a pod's main container, like kubectl exec.
func (c *cluster) exec(ctx context.Context, p *pod, command ...string) (string, error) {
	ctr, err := mainContainer(p.spec)
	if err != nil {
		return "", err
	}
	argv, what, err := p.argv(ctr, command)
	if err != nil {
		return "", err
	}
	return run(ctx, what, execTimeout, nil, argv...)
}

// sshDir is where a pod's SSH directory (the runtime's sshAuthMountPath)
// lives on the machine.
func (c *cluster) sshDir(p *pod) (string, error) {
	ctr, err := mainContainer(p.spec)
	if err != nil {
		return "", err
	}
	for _, m := range ctr.VolumeMounts {
		if m.MountPath == c.gen.sshPath() {
			return p.subPath(m)
		}
	}
	return "", fmt.Errorf("container %s of %s mounts nothing at %s", ctr.Name, p.hostname, c.gen.sshPath())
}
