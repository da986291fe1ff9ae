package mpi

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/launch/cmdline"
)

// What the operator writes into an agent job's pods is what torus-launch
// reads: each command line, its $(VAR) references expanded as the kubelet
// does, parses as the binary parses it, to the command the builder meant.
func TestLaunchCommandLinesParse(t *testing.T) {
	agentJob := SSHSettings{Path: "/home/mpiuser/.ssh", Port: 2222, Agent: true}
	fromImage := agentJob
	fromImage.AgentBinary = "/usr/local/bin/torus-launch"
	sshDir := SSHVolumeMountPath + "/" + SSHDirSubPath
	keys := func(dir string) cmdline.Setup {
		return cmdline.Setup{SecretDir: SSHSecretMountPath, Dir: dir, RunKey: "run", NextPrefix: "next-", Run: "2", Link: true}
	}
	wait := func(readsMark bool) cmdline.Wait {
		w := cmdline.Wait{Hostfile: SSHSecretMountPath + "/hostfile", CallBack: "pi-launcher-0-0.pi", Port: 2222,
			Key: SSHPrivateKeyFile, KnownHosts: SSHKnownHosts, Timeout: hostsAcceptTimeout}
		if readsMark {
			w.ReadyFile = PodInfoMountPath + "/" + PodInfoWorkersReady
		}
		return w
	}
	file := func(key, name string, mode uint32) cmdline.File {
		return cmdline.File{Key: key, Name: name, Mode: os.FileMode(mode), Keyed: true}
	}
	clientFiles := []cmdline.File{file(SSHPrivateKey, SSHPrivateKeyFile, 0o600), file(SSHKnownHosts, SSHKnownHosts, 0o644)}
	workerFiles := []cmdline.File{file(SSHPrivateKey, SSHPrivateKeyFile, 0o600), file(SSHKnownHosts, SSHKnownHosts, 0o644),
		file(sshAuthorizedKeys, sshAuthorizedKeys, 0o600), file(SSHHostKey, SSHHostKey, 0o600)}
	withFiles := func(s cmdline.Setup, files []cmdline.File) cmdline.Setup {
		s.InstallDir, s.Files = LaunchBinDir, files
		return s
	}
	launcherSetup := withFiles(keys(sshDir), clientFiles)
	waitingSetup := launcherSetup
	w := wait(true)
	waitingSetup.Wait = &w
	openSSHWait := keys(SSHVolumeMountPath + "/wait")
	openSSHWait.Files = clientFiles
	hostKeyOnly := wait(true)
	hostKeyOnly.HostKeyOnly = true
	openSSHWait.Wait = &hostKeyOnly
	agent := cmdline.Agent{Listen: ":2222", HostKey: agentJob.Path + "/" + SSHHostKey, AuthorizedKeys: agentJob.Path + "/" + sshAuthorizedKeys}
	imageAgent := agent
	imageAgent.HostKey, imageAgent.AuthorizedKeys = sshDir+"/"+SSHHostKey, sshDir+"/"+sshAuthorizedKeys
	workerFromImage := withFiles(keys(sshDir), workerFiles)
	workerFromImage.Command = append([]string{LaunchBinDir + "/" + LaunchBinary}, imageAgent.Args()...)
	program := []string{"mpirun", "-np", "4", "python", "train.py"}

	tests := []struct {
		name string
		// argv is the container's command line, the binary's path first
		// where the builder gives it.
		argv []string
		want cmdline.Command
	}{
		{name: "the launcher's setup", argv: LaunchSetupArgs(agentJob, api.RoleLauncher), want: launcherSetup},
		{name: "a worker's setup", argv: LaunchSetupArgs(agentJob, api.RoleWorker), want: withFiles(keys(sshDir), workerFiles)},
		{name: "a launcher's setup that waits for its workers", argv: LauncherSetupWaitArgs(agentJob, "pi-launcher-0-0.pi"), want: waitingSetup},
		{name: "the wait for OpenSSH's workers", argv: LaunchWaitArgs(agentJob, "pi-launcher-0-0.pi"), want: openSSHWait},
		{name: "the launcher's wait, then its program", argv: LaunchWaitCommand(agentJob, "pi-launcher-0-0.pi", false, program)[1:],
			want: cmdline.WaitThenRun{Dir: agentJob.Path, Wait: wait(true), Quiet: 5 * time.Second, Command: program}},
		{name: "the wait of a launcher created once its workers were Ready", argv: LaunchWaitCommand(agentJob, "pi-launcher-0-0.pi", true, program)[1:],
			want: cmdline.WaitThenRun{Dir: agentJob.Path, Wait: wait(false), Quiet: 5 * time.Second, Command: program}},
		{name: "a worker's agent", argv: LaunchAgentCommand(agentJob)[1:], want: agent},
		{name: "a worker whose image holds the binary", argv: LaunchFromImageCommand(fromImage, api.RoleWorker, LaunchAgentCommand(fromImage))[1:],
			want: workerFromImage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			argv := make([]string, len(tc.argv))
			for i, a := range tc.argv {
				argv[i] = strings.ReplaceAll(a, "$("+EnvRestartAttempt+")", "2")
			}
			got, err := cmdline.Parse(argv)
			if err != nil {
				t.Fatalf("torus-launch %q: %v", argv, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("torus-launch %q (-want +parsed):\n%s", argv, diff)
			}
		})
	}
	if got := LaunchAgentCommand(agentJob)[0]; got != LaunchBinDir+"/"+cmdline.Binary {
		t.Errorf("the agent runs %s, want the installed %s", got, cmdline.Binary)
	}
	if got := LaunchFromImageCommand(fromImage, api.RoleWorker, nil)[0]; got != fromImage.AgentBinary {
		t.Errorf("a container whose image holds the binary runs %s, want %s", got, fromImage.AgentBinary)
	}
}
