package wire_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/torus-mpi/torus/operator/mpi"
	"github.com/torus-mpi/torus/test/framework"
)

// weakHostKeyChecking matches ssh settings that stop or weaken host key
// verification, in ssh_config ("Key value") or option ("-o Key=value") form.
var weakHostKeyChecking = regexp.MustCompile(`(?i)StrictHostKeyChecking["'\s=:]+(no|off|accept-new)\b|UserKnownHostsFile["'\s=:]+/dev/null`)

// expectNoWeakHostKeyChecking searches everything the operator generated for
// a job.
func expectNoWeakHostKeyChecking(g *generated) {
	GinkgoHelper()
	texts := map[string]string{"hostfile ConfigMap": g.hostfile.Data[mpi.HostfileKey]}
	js, err := json.Marshal(g.jobSet)
	Expect(err).NotTo(HaveOccurred())
	texts["JobSet"] = string(js)
	for k, v := range g.secret.Data {
		texts["Secret key "+k] = string(v)
	}
	for what, text := range texts {
		Expect(weakHostKeyChecking.FindString(text)).To(BeEmpty(), "%s weakens host key checking", what)
	}
}

var _ = Describe("SSH between jobs", func() {
	It("refuses another job's key on a job's workers, and accepts the job's own", func(ctx SpecContext) {
		tc := toolchains[0]
		ns := fw.NewNamespace(ctx, "wire")
		first := newTrainJob(ctx, ns.Name, nextJobName(tc), tc, 2, 1)
		second := newTrainJob(ctx, ns.Name, nextJobName(tc), tc, 2, 1)
		Expect(second.secret.Data[mpi.SSHPrivateKey]).NotTo(Equal(first.secret.Data[mpi.SSHPrivateKey]), "jobs have keys of their own")
		c := startCluster(ctx, first, tc)

		By("handing the first job's launcher the second job's private key")
		dir, err := c.sshDir(c.launcher)
		Expect(err).NotTo(HaveOccurred())
		const foreign = "other-job_" + mpi.SSHPrivateKeyFile
		u, err := c.launcher.user(must(mainContainer(c.launcher.spec)))
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, foreign)
		Expect(os.WriteFile(path, second.secret.Data[mpi.SSHPrivateKey], 0o600)).To(Succeed())
		Expect(os.Chown(path, int(u.uid), int(u.gid))).To(Succeed())

		// Every setting is given here, none read from the job's ssh
		// config, so that the key is the only difference between the two
		// logins and host keys are checked against the first job's
		// known_hosts.
		sshDir := first.sshPath()
		port := clientConfigValue(string(first.secret.Data[mpi.SSHClientConfig]), "Port")
		Expect(port).NotTo(BeEmpty(), "the job's ssh config names the port")
		target := first.hostfileHosts()[0]
		login := func(identity string) (string, error) {
			return c.exec(ctx, c.launcher, "ssh", "-F", "/dev/null", "-p", port,
				"-o", "IdentityFile="+sshDir+"/"+identity, "-o", "IdentitiesOnly=yes",
				"-o", "UserKnownHostsFile="+sshDir+"/"+mpi.SSHKnownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
				"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
				target, "hostname")
		}

		out, err := login(foreign)
		Expect(err).To(HaveOccurred(), "a worker of %s let the key of %s in:\n%s", first.trainJob.Name, second.trainJob.Name, out)
		Expect(out).To(ContainSubstring("Permission denied (publickey)"), "the worker refuses the key, after its host key was accepted")
		AddReportEntry("ssh with another job's key", strings.TrimSpace(out))

		out, err = login(mpi.SSHPrivateKeyFile)
		Expect(err).NotTo(HaveOccurred(), "the job's own key logs in:\n%s", out)
		Expect(strings.TrimSpace(out)).To(Equal(c.workers[0].hostname))
	}, NodeTimeout(specTimeout))

	It("is never told to skip host key checks, anywhere the operator's output comes from", func() {
		root := framework.RepoRoot()
		for _, dir := range []string{"operator", "plugin", "samples", "kustomize", "bundle"} {
			if _, err := os.Stat(filepath.Join(root, dir)); os.IsNotExist(err) {
				continue // not every tree has every install path yet
			}
			err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
				// Tests may spell the weak settings out to assert their
				// absence; they generate nothing.
				if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") {
					return err
				}
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				Expect(weakHostKeyChecking.FindString(string(data))).To(BeEmpty(), "%s weakens host key checking", path)
				return nil
			})
			Expect(err).NotTo(HaveOccurred())
		}
	})
})

// clientConfigValue reads a keyword's first value from an ssh_config.
func clientConfigValue(config, keyword string) string {
	for _, line := range strings.Split(config, "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && strings.EqualFold(fields[0], keyword) {
			return fields[1]
		}
	}
	return ""
}
