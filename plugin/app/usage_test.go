package app_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/torus-mpi/torus/plugin/app"
	"github.com/torus-mpi/torus/plugin/cmdutil"
)

// kubeconfig names a cluster nobody listens for: these tests must not need
// one.
var kubeconfig string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubectl-mpi-usage")
	if err != nil {
		panic(err)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: none
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: none
  context: {cluster: none, user: none, namespace: default}
users:
- name: none
  user: {token: x}
current-context: none
`), 0o600); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// execute runs kubectl mpi in-process with no cluster behind it.
func execute(args ...string) (stdout string, err error) {
	var out, errOut bytes.Buffer
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	cmd := app.NewCmd(flags, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), err
}

// Wrong command lines fail with exit code 2 and say what to do, before
// anything is sent to a cluster.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"run"}, "run needs a job name: kubectl mpi run NAME --image IMAGE -- COMMAND (or -f FILE)"},
		{[]string{"run", "pi"}, "--image is required: the container image of the launcher and the workers (or --runtime, to run the image of that runtime)"},
		{[]string{"run", "pi", "extra", "--image", "x"}, `run takes one job name (got ["pi" "extra"]); put the command after --, e.g. kubectl mpi run pi --image IMG -- mpirun ./pi`},
		{[]string{"run", "pi", "--image", "x", "--dry-run=maybe"}, `--dry-run="maybe": use none, client or server`},
		{[]string{"run", "pi", "--image", "x", "--timeout", "5s"}, "--timeout bounds --wait and --follow: add one of them"},
		{[]string{"run", "pi", "--image", "x", "--dry-run=server", "--wait"}, "--dry-run=server submits nothing to wait for: drop --wait and --follow"},
		{[]string{"run", "-f", "job.yaml", "--workers", "3"}, "--workers shapes a job built from flags; with -f, set it in the file"},
		{[]string{"run", "-f", "-", "-f", "-"}, "-f - (standard input) can be given once"},
		{[]string{"migrate", "-f", "-", "-f", "-"}, "-f - (standard input) can be given once"},
		{[]string{"run", "pi", "--image", "x", "-o", "wide"}, `-o "wide": use yaml, json or name`},
		{[]string{"run", "pi", "--image", "x", "-o", "jsonpath"}, `-o "jsonpath": use yaml, json or name`},
		{[]string{"run", "pi", "--image", "x", "--workers", "0", "--mpi", "lam"}, "--mpi: unknown MPI implementation \"lam\": use one of intel, intelmpi, mpich, openmpi, openmpi4, openmpi5\n--workers=0: a job needs at least 1 worker"},
		{[]string{"run", "pi", "--image", "x", "--volume", "/data:/data"}, `--volume "/data:/data": write it as pvc:CLAIM:/mount/path (append :ro for read-only)`},
		{[]string{"run", "pi", "--image", "x", "--env", "OMPI_MCA_orte_default_hostfile=/x"}, "--env OMPI_MCA_orte_default_hostfile: Torus sets OMPI_MCA_orte_default_hostfile from the job's hostfile and SSH settings; remove it"},
		{[]string{"run", "pi", "--image", "x", "--workers", "many"}, `invalid argument "many" for "--workers" flag: strconv.ParseInt: parsing "many": invalid syntax (see kubectl mpi run --help)`},
		{[]string{"run", "--bogus"}, "unknown flag: --bogus (see kubectl mpi run --help)"},
		{[]string{"list", "-o", "table"}, `-o "table": use wide, json, yaml or name`},
		{[]string{"list", "pi"}, "list takes no arguments (got 1 arguments): see kubectl mpi list --help"},
		{[]string{"list", "--chunk-size", "-1"}, "--chunk-size -1: use a positive number, or 0 for one request"},
		{[]string{"list", "-l", "a in (b"}, `-l "a in (b": unable to parse requirement: found '', expected: ',' or ')'`},
		{[]string{"describe"}, "describe takes one job name (got 0 arguments): see kubectl mpi describe --help"},
		{[]string{"logs", "pi", "--rank", "1", "--worker", "2"}, "--rank, --worker and --launcher each pick pods: give one of them"},
		{[]string{"logs", "pi", "--tail", "-5"}, "--tail=-5: give a number of lines, or -1 for all"},
		{[]string{"logs", "pi", "-f", "--previous"}, "--previous reads a container that has stopped: drop -f"},
		{[]string{"wait", "pi", "--for=condition=Done"}, `--for="condition=Done": use condition=Complete, condition=Failed or condition=Running`},
		{[]string{"delete"}, "name the jobs to delete, or give --all"},
		{[]string{"delete", "pi", "--all"}, `--all deletes every MPI job of the namespace: drop the names ["pi"], or drop --all`},
		{[]string{"exec-rank", "pi", "3"}, "give the command after --, e.g. kubectl mpi exec-rank pi 3 -- hostname"},
		{[]string{"exec-rank", "pi", "x", "--", "ls"}, `rank "x": give a rank number from 0`},
		{[]string{"exec-rank", "pi", "--", "ls"}, `exec-rank takes a job name and a rank (got ["pi"]): kubectl mpi exec-rank NAME RANK -- COMMAND`},
		{[]string{"exec-rank", "pi", "--all", "-it", "--", "sh"}, "--all runs on many pods at once: -i and -t need one"},
		{[]string{"top", "pi", "--interval", "10ms"}, "--interval=10ms: use at least 500ms"},
		{[]string{"doctor", "-o", "yaml"}, `-o "yaml": use json, or nothing for the report`},
		{[]string{"completion"}, "completion takes a shell: bash, zsh or fish"},
		{[]string{"rerun"}, "rerun needs the name of the job to run again"},
		{[]string{"migrate"}, "nothing to migrate: give manifests with -f FILE|DIR|- or read the cluster's MPIJobs with --from-cluster"},
		{[]string{"migrate", "-f", "-", "--dry-run=server"}, "--dry-run=server checks what --apply would create: add --apply (without --apply nothing is sent to the cluster)"},
		{[]string{"migrate", "pi.yaml"}, `migrate takes no arguments (got ["pi.yaml"]): give manifests with -f`},
		{[]string{"migrate", "--bogus"}, "unknown flag: --bogus (see kubectl mpi migrate --help)"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := execute(tc.args...)
			if err == nil {
				t.Fatalf("succeeded, want %q", tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			if code := cmdutil.Code(err); code != cmdutil.ExitUsage {
				t.Errorf("exit code %d, want %d", code, cmdutil.ExitUsage)
			}
		})
	}
}

func TestHelpAndCompletion(t *testing.T) {
	out, err := execute("run", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Usage:\n  kubectl mpi run NAME --image IMAGE") {
		t.Errorf("run --help does not show kubectl mpi usage:\n%s", out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, err := execute("completion", shell)
		if err != nil || !strings.Contains(out, "kubectl-mpi") {
			t.Errorf("completion %s: %v, script without kubectl-mpi", shell, err)
		}
	}
	out, err = execute("version")
	if err != nil || !strings.HasPrefix(out, "kubectl-mpi ") {
		t.Errorf("version = %q, %v", out, err)
	}
}

// run --dry-run=client builds the TrainJob without a cluster.
func TestRunDryRunClient(t *testing.T) {
	out, err := execute("run", "pi", "--image", "img", "--mpi", "mpich", "--workers", "4", "--gpus", "2",
		"--queue", "team", "--dry-run=client", "-o", "yaml", "--", "mpirun", "-n", "8", "./pi")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kind: TrainJob", "name: pi", "namespace: default", "kueue.x-k8s.io/queue-name: team",
		"name: torus-mpich", "numNodes: 4", "nvidia.com/gpu: \"2\"", "- mpirun", "- ./pi",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
}
