package wire_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// Bounds on the processes of a job; nothing the test starts runs unbounded.
const (
	initTimeout   = 20 * time.Second
	readyTimeout  = 20 * time.Second
	launchTimeout = 60 * time.Second
	execTimeout   = 20 * time.Second
)

// cluster runs one job's pods on this machine, the way the kubelet would run
// the JobSet: each pod's volumes projected from the job's Secret and
// ConfigMap, its init containers run to completion, the workers' containers
// (sshd) started and probed ready, and only then the launcher's init
// containers and container.
type cluster struct {
	gen      *generated
	tc       *toolchain
	dir      string
	net      *network
	launcher *pod
	workers  []*pod

	// ctx bounds the workers' long-running processes; cancel stops them.
	ctx    context.Context
	cancel context.CancelFunc
	procs  map[*pod]*running
}

// running is a container process in the background.
type running struct {
	cancel context.CancelFunc
	// exited is closed when the process has exited, with err its exit.
	exited chan struct{}
	err    error
}

// startCluster brings up a job's pods, up to the point where the launcher
// may start, and removes everything again when the spec ends.
func startCluster(ctx context.Context, g *generated, tc *toolchain) *cluster {
	GinkgoHelper()
	bg, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c := &cluster{gen: g, tc: tc, ctx: bg, cancel: cancel, procs: map[*pod]*running{},
		dir: filepath.Join(sandbox.jobs, g.trainJob.Name)}
	DeferCleanup(func(ctx SpecContext) {
		Expect(c.stop(ctx)).To(Succeed(), "cleaning up the pods of %s", g.trainJob.Name)
	}, NodeTimeout(time.Minute))
	Expect(c.setUp(ctx)).To(Succeed(), "bringing up the pods of %s", g.trainJob.Name)
	return c
}

func (c *cluster) setUp(ctx context.Context) error {
	js := c.gen.jobSet
	if n := js.Spec.Network; n == nil || n.EnableDNSHostnames == nil || !*n.EnableDNSHostnames || n.Subdomain == "" {
		return fmt.Errorf("JobSet %s does not give its pods DNS host names (spec.network %+v), so the hostfile's names would not resolve", js.Name, js.Spec.Network)
	}
	var err error
	if c.net, err = newNetwork(ctx, c.gen.trainJob.Name); err != nil {
		return err
	}
	launcherSpec, _, err := c.gen.podSpec(mpi.LauncherJob)
	if err != nil {
		return err
	}
	nodeSpec, workers, err := c.gen.podSpec(mpi.NodeJob)
	if err != nil {
		return err
	}
	if c.launcher, err = c.addPod(ctx, launcherSpec, mpi.LauncherJob, 0, 0); err != nil {
		return err
	}
	for i := range int(workers) {
		w, err := c.addPod(ctx, nodeSpec, mpi.NodeJob, i, i+1)
		if err != nil {
			return err
		}
		c.workers = append(c.workers, w)
	}
	if err := c.writeEtc(); err != nil {
		return err
	}
	secrets := map[string]*corev1.Secret{c.gen.secret.Name: c.gen.secret}
	configMaps := map[string]*corev1.ConfigMap{} // the operator makes none
	for _, w := range c.workers {
		if err := w.materialise(secrets, configMaps); err != nil {
			return err
		}
		if err := c.runInitContainers(ctx, w); err != nil {
			return err
		}
	}
	for _, w := range c.workers {
		if err := c.start(w); err != nil {
			return err
		}
	}
	// The launcher's pod starts once the workers are Ready (JobSet's
	// dependsOn); its init container then waits for their sshd.
	for _, w := range c.workers {
		if err := c.waitReady(ctx, w); err != nil {
			return err
		}
	}
	if err := c.launcher.materialise(secrets, configMaps); err != nil {
		return err
	}
	return c.runInitContainers(ctx, c.launcher)
}

// pods are the launcher and the workers.
func (c *cluster) pods() []*pod { return append([]*pod{c.launcher}, c.workers...) }

// addPod creates the namespace of pod index of a replicated job; slot
// numbers pods across the job for their addresses. Host names follow
// JobSet's scheme for a replicated job of one indexed Job:
// <jobset>-<replicated job>-<job index>-<completion index>.
func (c *cluster) addPod(ctx context.Context, spec *corev1.PodSpec, replicatedJob string, index, slot int) (*pod, error) {
	hostname := fmt.Sprintf("%s-%s-0-%d", c.gen.jobSet.Name, replicatedJob, index)
	ns, addr, err := c.net.addPod(ctx, hostname, slot)
	if err != nil {
		return nil, err
	}
	p := &pod{hostname: hostname, address: addr, netns: ns, dir: filepath.Join(c.dir, hostname),
		spec: spec, tc: c.tc, hidden: []string{sandbox.jobs, "/etc/netns"},
		labels: map[string]string{mpi.LabelJobSetRestartAttempt: "0"}}
	for _, ctr := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		for _, path := range mountPoints(&ctr) {
			if err := sandbox.machine.mkdirAll(path); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// writeEtc writes each pod's hosts, passwd and group files where
// `ip netns exec` mounts them over /etc's.
func (c *cluster) writeEtc() error {
	for _, p := range c.pods() {
		passwd, group, err := userDatabase()
		if err != nil {
			return err
		}
		dir := filepath.Join("/etc/netns", p.netns)
		if err := sandbox.machine.mkdirAll(dir); err != nil {
			return err
		}
		hosts := c.hostsFile(p)
		fmt.Fprintf(GinkgoWriter, "/etc/hosts of %s:\n%s", p.hostname, hosts)
		for name, data := range map[string][]byte{"hosts": []byte(hosts), "passwd": passwd, "group": group} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return fmt.Errorf("writing %s of %s: %w", name, p.hostname, err)
			}
		}
	}
	return nil
}

// stop kills every process of the job, deletes its namespaces and removes
// its files. It goes on after errors and returns them all.
func (c *cluster) stop(ctx context.Context) error {
	for p := range c.procs {
		c.kill(p)
	}
	c.cancel()
	var errs []error
	if c.net != nil {
		errs = append(errs, c.net.remove(ctx))
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}
