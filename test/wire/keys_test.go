package wire_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/test/framework"
)

// weakHostKeyChecking matches ssh settings that stop or weaken host key
// verification, in ssh_config ("Key value") or option ("-o Key=value") form.
var weakHostKeyChecking = regexp.MustCompile(`(?i)StrictHostKeyChecking["'\s=:]+(no|off|accept-new)\b|UserKnownHostsFile["'\s=:]+/dev/null`)

// expectNoWeakHostKeyChecking searches everything the operator generated for
// a job.
func expectNoWeakHostKeyChecking(g *generated) {
	GinkgoHelper()
	texts := map[string]string{}
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
		u := c.launcher.user(must(mainContainer(c.launcher.spec)))
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

// Keys for OpenSSH in FIPS mode, which refuses ed25519: the operator's
// other algorithms, each proved with the real ssh and sshd, host keys
// checked against the job's known_hosts.
var _ = Describe("SSH keys of each algorithm", func() {
	for _, alg := range mpi.KeyAlgorithms {
		if alg == mpi.DefaultKeyAlgorithm {
			continue // every other spec runs with it
		}
		It("launches with "+string(alg)+" client and host keys", func(ctx SpecContext) {
			tc := toolchains[0]
			ns := fw.NewNamespace(ctx, "wire")
			g := newTrainJob(ctx, ns.Name, nextJobName(tc), tc, 2, 1, func(tj *trainer.TrainJob) {
				tj.Annotations = map[string]string{api.AnnotationSSHKeyAlgorithm: string(alg)}
			})
			want := map[mpi.KeyAlgorithm]string{mpi.KeyECDSAP256: ssh.KeyAlgoECDSA256, mpi.KeyECDSAP384: ssh.KeyAlgoECDSA384, mpi.KeyRSA3072: ssh.KeyAlgoRSA}[alg]
			for _, key := range []string{mpi.SSHPrivateKey, mpi.SSHHostKey} {
				signer, err := ssh.ParsePrivateKey(g.secret.Data[key])
				Expect(err).NotTo(HaveOccurred())
				Expect(signer.PublicKey().Type()).To(Equal(want), "the Secret's %s", key)
			}
			c := startCluster(ctx, g, tc)
			out, err := c.launch(ctx, launchTimeout)
			Expect(err).NotTo(HaveOccurred(), "mpirun failed; its output:\n%s", out)
			ranks, err := parseRanks(out)
			Expect(err).NotTo(HaveOccurred())
			Expect(ranks).To(HaveLen(2), "every rank reports once; output:\n%s", out)
		}, NodeTimeout(specTimeout))
	}
})
