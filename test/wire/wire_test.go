package wire_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// The jobs of the launch specs: several workers, several slots each, so
// that both the spread across hosts and the packing within one are checked.
const (
	workers = 3
	slots   = 2
)

// specTimeout bounds a spec: bringing up pods, one or two launches, cleanup.
const specTimeout = 3 * time.Minute

var jobSeq int

// nextJobName names a TrainJob; names become host and namespace names, so
// each job gets its own.
func nextJobName(tc *toolchain) string {
	jobSeq++
	return fmt.Sprintf("%s-%d", tc.short, jobSeq)
}

// sshRefusal finds the lines in which ssh says why it refused to connect.
var sshRefusal = regexp.MustCompile(`(?m)^.*(Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|UNPROTECTED PRIVATE KEY FILE|Permissions 0[0-7]+ for .* are too open|Permission denied \(publickey\)).*$`)

// refusedLaunchTimeout bounds a launch that must fail in a toolchain whose
// launcher hangs instead (hangsWhenSSHFails); ssh refuses in well under a
// second.
const refusedLaunchTimeout = 15 * time.Second

// launchRefused runs a launch that ssh must refuse.
func launchRefused(ctx context.Context, c *cluster) (string, error) {
	if c.tc.hangsWhenSSHFails {
		return c.launch(ctx, refusedLaunchTimeout)
	}
	return c.launch(ctx, launchTimeout)
}

// expectRefused checks that a launch failed, that ssh's own words say why,
// and that no rank ran, and reports ssh's words. The launch must have ended
// by itself, except where the toolchain is known to hang then.
func expectRefused(tc *toolchain, out string, err error, because string, want ...string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "mpirun succeeded although %s; its output:\n%s", because, out)
	if !tc.hangsWhenSSHFails {
		Expect(errors.Is(err, errTimedOut)).To(BeFalse(), "mpirun hung instead of failing when %s; its output:\n%s", because, out)
	}
	for _, w := range want {
		Expect(out).To(ContainSubstring(w), "mpirun failed, but not because %s; its output:\n%s", because, out)
	}
	Expect(rankLine.FindString(out)).To(BeEmpty(), "no rank may run when %s; output:\n%s", because, out)
	reasons := strings.Join(sshRefusal.FindAllString(out, -1), "\n")
	AddReportEntry("ssh refused the launch because "+because, reasons)
	fmt.Fprintf(GinkgoWriter, "launch failed as it must (%s), because %s; ssh said:\n%s\n", howItEnded(err), because, reasons)
}

var _ = Describe("An MPI TrainJob, run from the objects the operator generates", func() {
	for _, tc := range toolchains {
		Context("with "+tc.name, func() {
			var c *cluster

			BeforeEach(func(ctx SpecContext) {
				ns := fw.NewNamespace(ctx, "wire")
				c = startCluster(ctx, newTrainJob(ctx, ns.Name, nextJobName(tc), tc, workers, slots), tc)
			}, NodeTimeout(specTimeout))

			It("starts workers × slots ranks on the hosts the hostfile names, and their allreduce is right", func(ctx SpecContext) {
				out, err := c.launch(ctx, launchTimeout)
				Expect(err).NotTo(HaveOccurred(), "mpirun failed; its output:\n%s", out)
				ranks, err := parseRanks(out)
				Expect(err).NotTo(HaveOccurred())
				size := workers * slots
				Expect(ranks).To(HaveLen(size), "every rank reports once; output:\n%s", out)

				hostfile := c.gen.hostfileHosts()
				Expect(hostfile).To(HaveLen(workers), "one hostfile line per worker")
				subdomain := c.gen.jobSet.Spec.Network.Subdomain
				want := int64(size * (size + 1) / 2)
				hosts := sets.New[string]()
				for r := range size {
					rep, ok := ranks[r]
					Expect(ok).To(BeTrue(), "rank %d did not report; output:\n%s", r, out)
					Expect(rep.size).To(Equal(size), "rank %d's world size", r)
					Expect(rep.host+"."+subdomain).To(Equal(hostfile[r/slots]),
						"rank %d runs on %s, but with %d slots per host the hostfile puts it on %s", r, rep.host, slots, hostfile[r/slots])
					Expect(rep.sum).To(Equal(want), "rank %d's allreduce of rank+1", r)
					Expect(rep.vector).To(Equal("ok"), "rank %d's 2 MiB allreduce", r)
					Expect(rep.library).To(HavePrefix(tc.library), "rank %d runs with its own implementation's library", r)
					hosts.Insert(rep.host)
				}
				workerHosts := sets.New[string]()
				for _, w := range c.workers {
					workerHosts.Insert(w.hostname)
				}
				Expect(hosts).To(Equal(workerHosts), "ranks run on every worker and nowhere else (not on the launcher)")
				AddReportEntry(tc.name+" ranks", strings.Join(rankLine.FindAllString(out, -1), "\n"))
			}, NodeTimeout(specTimeout))

			It("gives every pod its own host name and files, with the SSH files its user's", func(ctx SpecContext) {
				out, err := c.exec(ctx, c.launcher, "cat", mpi.HostfilePath)
				Expect(err).NotTo(HaveOccurred(), out)
				Expect(out).To(Equal(c.gen.hostfile()), "the launcher's hostfile is the Secret's")
				for _, p := range c.pods() {
					role := api.RoleWorker
					if p == c.launcher {
						role = api.RoleLauncher
					}
					modes := mpi.SSHFileModes(role)
					Expect(c.exec(ctx, p, "hostname")).To(Equal(p.hostname+"\n"), "host name of %s", p.hostname)
					// Only the init container mounts the Secret, only
					// the launcher the hostfile, and no pod sees where
					// the test keeps the pods' volumes.
					empty := []string{sandbox.jobs, mpi.SSHSecretMountPath}
					if p != c.launcher {
						empty = append(empty, mpi.HostfileDir)
					}
					for _, dir := range empty {
						Expect(c.exec(ctx, p, "ls", "-A", dir)).To(BeEmpty(), "%s sees nothing in %s", p.hostname, dir)
					}
					u := p.user(must(mainContainer(p.spec)))
					out, err := c.exec(ctx, p, "find", c.gen.sshPath(), "-type", "f", "-printf", "%f %#m %U\n")
					Expect(err).NotTo(HaveOccurred(), out)
					got := map[string]string{}
					for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
						var name, mode, uid string
						_, err := fmt.Sscan(line, &name, &mode, &uid)
						Expect(err).NotTo(HaveOccurred(), line)
						Expect(uid).To(Equal(fmt.Sprint(u.uid)), "%s on %s belongs to the pod's user", name, p.hostname)
						got[name] = mode
					}
					Expect(got).To(Equal(modes), "the init container's files on %s and their modes (no host key on the launcher)", p.hostname)
				}
			}, NodeTimeout(specTimeout))

			It("verifies host keys: ssh's effective configuration for every worker is strict", func(ctx SpecContext) {
				expectNoWeakHostKeyChecking(c.gen)
				env, err := c.launcher.env(must(mainContainer(c.launcher.spec)))
				Expect(err).NotTo(HaveOccurred())
				var sshArgs []string
				for _, e := range env {
					if v, ok := strings.CutPrefix(e, tc.sshArgsEnv+"="); ok {
						sshArgs = strings.Fields(v)
					}
				}
				Expect(sshArgs).NotTo(BeEmpty(), "the launcher's %s", tc.sshArgsEnv)
				knownHosts := c.gen.sshPath() + "/" + mpi.SSHKnownHosts
				for _, host := range c.gen.hostfileHosts() {
					// ssh -G prints the settings ssh would use for host
					// with the arguments mpirun passes it.
					args := append(append([]string{"ssh", "-G"}, sshArgs...), host)
					out, err := c.exec(ctx, c.launcher, args...)
					Expect(err).NotTo(HaveOccurred(), out)
					Expect(out).To(ContainSubstring("\nstricthostkeychecking true\n"), "ssh to %s checks host keys", host)
					Expect(out).To(ContainSubstring("\nuserknownhostsfile "+knownHosts+"\n"), "ssh to %s trusts the job's known_hosts only", host)
					Expect(out).To(ContainSubstring("\nglobalknownhostsfile /dev/null\n"), "ssh to %s trusts the job's known_hosts only", host)
				}
			}, NodeTimeout(specTimeout))

			It("launches on workers whose sshd runs with the configuration of upstream Trainer's MPI images", func(ctx SpecContext) {
				// What upstream's DeepSpeed and MLX images start sshd with:
				// mpi-operator's base image configuration ("HostKey
				// <ssh dir>/id_rsa", which holds the job's host key on
				// Torus's workers), read from the pinned module and given
				// its port as that image's Dockerfile does.
				config := upstreamSSHDConfig(c.gen)
				for _, w := range c.workers {
					Expect(c.restartWith(ctx, w, []string{"/usr/sbin/sshd", "-De", "-f", config})).To(Succeed())
				}
				out, err := c.launch(ctx, launchTimeout)
				Expect(err).NotTo(HaveOccurred(), "mpirun failed; its output:\n%s", out)
				ranks, err := parseRanks(out)
				Expect(err).NotTo(HaveOccurred())
				Expect(ranks).To(HaveLen(workers*slots), "every rank reports once; output:\n%s", out)
			}, NodeTimeout(specTimeout))

			It("fails the launch when a worker presents a host key that is not the job's", func(ctx SpecContext) {
				w := c.workers[len(c.workers)-1]
				dir, err := c.sshDir(w)
				Expect(err).NotTo(HaveOccurred())
				impostor, err := mpi.GenerateSSHKeys(rand.Reader, mpi.DefaultKeyAlgorithm, "impostor")
				Expect(err).NotTo(HaveOccurred())
				// Overwriting keeps the files' owner and modes, so sshd
				// starts and serves the other key.
				Expect(os.WriteFile(filepath.Join(dir, mpi.SSHHostKey), impostor.HostPrivate, 0o600)).To(Succeed())
				Expect(os.WriteFile(filepath.Join(dir, mpi.SSHHostPublicKey), impostor.HostPublic, 0o644)).To(Succeed())
				Expect(c.restart(ctx, w)).To(Succeed())

				out, err := launchRefused(ctx, c)
				expectRefused(tc, out, err, w.hostname+" presents a host key that is not in the job's known_hosts",
					"Host key verification failed")
			}, NodeTimeout(specTimeout))

			It("fails the launch when the launcher's private key is readable by others", func(ctx SpecContext) {
				dir, err := c.sshDir(c.launcher)
				Expect(err).NotTo(HaveOccurred())
				Expect(os.Chmod(filepath.Join(dir, mpi.SSHPrivateKeyFile), 0o644)).To(Succeed())

				out, err := launchRefused(ctx, c)
				expectRefused(tc, out, err, "the private key has mode 0644, which ssh rejects",
					"UNPROTECTED PRIVATE KEY FILE", "are too open")
			}, NodeTimeout(specTimeout))
		})

		Context("with "+tc.name+", under a UID OpenShift assigns (GID 0, no account in the image)", func() {
			var c *cluster
			var uid int64

			BeforeEach(func(ctx SpecContext) {
				ns := fw.NewNamespace(ctx, "wire")
				g := newTrainJob(ctx, ns.Name, nextJobName(tc), tc, workers, slots)
				// As restricted-v2 (MustRunAsRange) does: a UID from the
				// namespace's range on every container, no group.
				uid = 1_000_000_000 + mathrand.Int64N(1_000_000_000)
				assignUID(g, uid)
				c = startCluster(ctx, g, tc)
			}, NodeTimeout(specTimeout))

			It("starts the ranks, logging in as an account the init container added", func(ctx SpecContext) {
				for _, p := range c.pods() {
					out, err := c.exec(ctx, p, "id", "-u", "-n")
					Expect(err).NotTo(HaveOccurred(), out)
					Expect(out).To(Equal(mpi.PasswdUser+"\n"), "%s runs as the account the init container added", p.hostname)
					Expect(c.exec(ctx, p, "id", "-u")).To(Equal(fmt.Sprintf("%d\n", uid)), "%s runs as the assigned UID", p.hostname)
					Expect(c.exec(ctx, p, "id", "-g")).To(Equal("0\n"), "%s runs with GID 0", p.hostname)
				}
				out, err := c.launch(ctx, launchTimeout)
				Expect(err).NotTo(HaveOccurred(), "mpirun failed; its output:\n%s", out)
				ranks, err := parseRanks(out)
				Expect(err).NotTo(HaveOccurred())
				Expect(ranks).To(HaveLen(workers*slots), "every rank reports once; output:\n%s", out)
				for r, rep := range ranks {
					Expect(rep.sum).To(Equal(int64(workers*slots*(workers*slots+1)/2)), "rank %d's allreduce of rank+1", r)
				}
			}, NodeTimeout(specTimeout))

			It("refuses the login when a worker's SSH directory is group-writable (sshd's StrictModes)", func(ctx SpecContext) {
				w := c.workers[len(c.workers)-1]
				dir, err := c.sshDir(w)
				Expect(err).NotTo(HaveOccurred())
				Expect(os.Chmod(dir, 0o770)).To(Succeed())

				out, err := launchRefused(ctx, c)
				expectRefused(tc, out, err, w.hostname+"'s SSH directory is group-writable, which StrictModes refuses",
					"Permission denied (publickey)")
			}, NodeTimeout(specTimeout))
		})
	}
})

// must returns v and fails the spec on err.
func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}

// upstreamSSHDConfig writes, once, the sshd configuration upstream
// Trainer's MPI runtime images carry: mpi-operator's base image's, with the
// port that image's Dockerfile appends. Its paths are mpiuser's, as the
// sample runtimes' SSH directory is.
func upstreamSSHDConfig(g *generated) string {
	GinkgoHelper()
	Expect(g.sshPath()).To(Equal("/home/mpiuser/.ssh"), "upstream's configuration names /home/mpiuser/.ssh/id_rsa")
	path := filepath.Join(sandbox.image, "upstream-sshd_config")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubeflow/mpi-operator").Output()
	Expect(err).NotTo(HaveOccurred())
	base, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "build", "base", "sshd_config"))
	Expect(err).NotTo(HaveOccurred())
	Expect(string(base)).To(ContainSubstring("HostKey /home/mpiuser/.ssh/id_rsa"))
	Expect(os.WriteFile(path, append(base, []byte("Port 2222\n")...), 0o644)).To(Succeed())
	return path
}
