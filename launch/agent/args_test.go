package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The command lines launchers build, as their verbose output shows them,
// with the job's ssh arguments (-F, from plm_rsh_args, plm_ssh_args,
// HYDRA_LAUNCHER_EXTRA_ARGS and I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS).
const (
	ompi4Env  = "    PATH=/opt/ompi/bin:$PATH ; export PATH ; LD_LIBRARY_PATH=/opt/ompi/lib:$LD_LIBRARY_PATH ; export LD_LIBRARY_PATH ; DYLD_LIBRARY_PATH=/opt/ompi/lib:$DYLD_LIBRARY_PATH ; export DYLD_LIBRARY_PATH ;   /opt/ompi/bin/orted"
	ompi5Env  = "PRTE_PREFIX=/opt/ompi;export PRTE_PREFIX;LD_LIBRARY_PATH=/opt/ompi/lib:$LD_LIBRARY_PATH;export LD_LIBRARY_PATH;DYLD_LIBRARY_PATH=/opt/ompi/lib:$DYLD_LIBRARY_PATH;export DYLD_LIBRARY_PATH;/opt/ompi/bin/prted"
	intelBase = "/opt/intel/oneapi/mpi/2021.6.0//bin/"
)

var (
	ompi4Args = []string{"-mca", "ess", `"env"`, "-mca", "ess_base_jobid", `"2600206336"`, "-mca", "ess_base_vpid", "1",
		"-mca", "ess_base_num_procs", `"3"`, "-mca", "orte_node_regex", `"pi-launcher-0,pi-node-[1:0-1]@0(3)"`,
		"-mca", "orte_hnp_uri", `"2600206336.0;tcp://10.0.0.5:38363"`, "-mca", "plm", `"rsh"`, "--tree-spawn",
		"-mca", "routed", `"radix"`, "-mca", "orte_parent_uri", `"2600206336.0;tcp://10.0.0.5:38363"`,
		"-mca", "plm_rsh_args", `"-F /etc/torus-ssh/config"`, "-mca", "pmix", `"^s1,s2,cray,isolated"`}
	ompi5Args = []string{"--prtemca", "ess", `"env"`, "--prtemca", "ess_base_nspace", `"prterun-pi-launcher-0-220913@0"`,
		"--prtemca", "ess_base_vpid", "1", "--prtemca", "ess_base_num_procs", `"3"`,
		"--prtemca", "prte_hnp_uri", `"prterun-pi-launcher-0-220913@0.0;tcp://10.0.0.5:57717:28"`,
		"--prtemca", "plm", `"ssh"`, "--tree-spawn", "--prtemca", "prte_parent_uri", `"prterun-pi-launcher-0-220913@0.0;tcp://10.0.0.5:57717:28"`}
	hydraArgs = []string{`"/usr/bin/hydra_pmi_proxy"`, "--control-port", "pi-launcher-0.pi:40537", "--rmk", "user",
		"--launcher", "ssh", "--demux", "poll", "--pgid", "0", "--retries", "10", "--usize", "-2", "--proxy-id", "0"}
	intelArgs = []string{intelBase + "/hydra_bstrap_proxy", "--upstream-host", "pi-launcher-0", "--upstream-port", "42983",
		"--pgid", "0", "--launcher", "ssh", "--launcher-number", "0", "--base-path", intelBase, "--tree-width", "16",
		"--tree-level", "1", "--time-left", "-1", "--launch-type", "2", "--debug", "--proxy-id", "0", "--node-id", "0",
		"--subtree-size", "1", intelBase + "/hydra_pmi_proxy", "--usize", "-1", "--auto-cleanup", "1", "--abort-signal", "9"}
)

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestParseArgs(t *testing.T) {
	const host = "pi-node-0-0.pi"
	for _, tc := range []struct {
		name string
		args []string
		want Command
	}{{
		name: "Open MPI 4",
		args: cat([]string{"-F", "/etc/torus-ssh/config", host, ompi4Env}, ompi4Args),
		want: Command{Host: host, Command: ompi4Env + " " + strings.Join(ompi4Args, " ")},
	}, {
		name: "Open MPI 4 with -x",
		args: cat([]string{"-x", host, "orted"}, ompi4Args),
		want: Command{Host: host, Command: "orted " + strings.Join(ompi4Args, " ")},
	}, {
		name: "Open MPI 5 (PRRTE)",
		args: cat([]string{"-F", "/etc/torus-ssh/config", host, ompi5Env}, ompi5Args),
		want: Command{Host: host, Command: ompi5Env + " " + strings.Join(ompi5Args, " ")},
	}, {
		name: "MPICH Hydra",
		args: cat([]string{"-x", "-F", "/etc/torus-ssh/config", host}, hydraArgs),
		want: Command{Host: host, Command: strings.Join(hydraArgs, " ")},
	}, {
		name: "Intel MPI",
		args: cat([]string{"-q", "-x", "-F", "/etc/torus-ssh/config", host}, intelArgs),
		want: Command{Host: host, Command: strings.Join(intelArgs, " ")},
	}, {
		name: "user and port",
		args: []string{"-p", "2222", "mpi@" + host, "hostname"},
		want: Command{User: "mpi", Host: host, Port: 2222, Command: "hostname"},
	}, {
		name: "attached values",
		args: []string{"-p2222", "-lmpi", host, "hostname"},
		want: Command{User: "mpi", Host: host, Port: 2222, Command: "hostname"},
	}, {
		name: "-l wins over user@",
		args: []string{"-l", "mpi", "root@" + host, "hostname"},
		want: Command{User: "mpi", Host: host, Command: "hostname"},
	}, {
		name: "-o options",
		args: []string{"-oPort=2223", "-o", "ConnectTimeout=5", "-o", "StrictHostKeyChecking no",
			"-o", "UserKnownHostsFile=/dev/null", "-oConnectionAttempts=3", "-o", "LogLevel=ERROR",
			"-o", "BatchMode=yes", "-o", "user = mpi", host, "hostname"},
		want: Command{User: "mpi", Host: host, Port: 2223, ConnectTimeout: 5 * time.Second, ConnectionAttempts: 3, Command: "hostname"},
	}, {
		name: "-o with a space",
		args: []string{"-o", "Port 2224", host, "hostname"},
		want: Command{Host: host, Port: 2224, Command: "hostname"},
	}, {
		name: "grouped flags, no stdin",
		args: []string{"-xqnT", host, "hostname"},
		want: Command{Host: host, NoStdin: true, Command: "hostname"},
	}, {
		name: "options after the host",
		args: []string{host, "-x", "-p", "2222", "echo", "-p"},
		want: Command{Host: host, Port: 2222, Command: "echo -p"},
	}, {
		name: "-- ends options",
		args: []string{"-x", "--", host, "-p", "2222"},
		want: Command{Host: host, Command: "-p 2222"},
	}, {
		name: "words joined by single spaces",
		args: []string{host, "printf", "'%s|'", "a b", " c"},
		want: Command{Host: host, Command: "printf '%s|' a b  c"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseArgs(%q) (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no host"},
		{[]string{"-x"}, "no host"},
		{[]string{"host"}, "no remote command"},
		{[]string{"-x", "host", "-q"}, "no remote command"},
		{[]string{"mpi@", "hostname"}, "empty host name"},
		{[]string{"-p"}, "-p needs a value"},
		{[]string{"-p", "0", "host", "true"}, `bad port "0"`},
		{[]string{"-o", "Port=ssh", "host", "true"}, `bad port "ssh"`},
		{[]string{"-o", "ConnectionAttempts=0", "host", "true"}, "want a positive number"},
		{[]string{"-o", "ConnectTimeout=5s", "host", "true"}, "want a number of seconds"},
		{[]string{"-L", "8080:localhost:80", "host", "true"}, "-L is not supported"},
		{[]string{"-N", "host", "true"}, "-N is not supported"},
	} {
		_, err := ParseArgs(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseArgs(%q) = %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
