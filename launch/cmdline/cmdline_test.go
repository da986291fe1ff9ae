package cmdline

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fullWait() Wait {
	return Wait{
		Hostfile:    "/etc/torus-mpi/ssh-secret/hostfile",
		CallBack:    "job-launcher-0-0.job",
		Port:        2222,
		Key:         "id_ed25519",
		KnownHosts:  "known_hosts",
		HostKeyOnly: true,
		ReadyFile:   "/etc/torus-mpi/pod/workers-ready",
		Timeout:     30 * time.Second,
	}
}

// Every field of every command set: a field that Args does not render, or
// that Parse does not bind, comes back different.
func TestParseReadsWhatArgsRenders(t *testing.T) {
	w := fullWait()
	tests := []struct {
		name    string
		command Command
		full    bool
	}{
		{name: "setup, every field", full: true, command: Setup{
			SecretDir: "/etc/torus-mpi/ssh-secret", Dir: "/etc/torus-mpi/ssh-volume/ssh",
			RunKey: "run", NextPrefix: "next-", Run: "3", Link: true,
			Files: []File{
				{Key: "ssh-privatekey", Name: "id_ed25519", Mode: 0o600, Keyed: true},
				{Key: "config", Name: "config", Mode: 0o600},
				{Key: "known_hosts", Name: "known_hosts", Mode: 0o644, Keyed: true},
			},
			InstallDir: "/opt/torus-mpi/bin", Wait: &w,
			Command: []string{"mpirun", "--np", "4", "--", "python", "-u", "train.py"},
		}},
		{name: "setup, keys alone", command: Setup{
			SecretDir: "/s", Dir: "/d", RunKey: "run", NextPrefix: "next-",
			Files: []File{{Key: "k", Name: "n", Mode: 0o400}},
		}},
		{name: "wait, every field", full: true, command: WaitThenRun{
			Dir: "/etc/torus-mpi/ssh-volume/ssh", Wait: w, Quiet: 5 * time.Second,
			Command: []string{"mpirun", "-np", "2", "hostname"},
		}},
		{name: "wait, logging in, bounded from its start", command: WaitThenRun{
			Dir: "/d", Wait: Wait{Hostfile: "/h", Port: 22, Key: "id", KnownHosts: "kh", Timeout: time.Minute},
			Command: []string{"--looks-like-a-flag"},
		}},
		{name: "agent, every field", full: true, command: Agent{
			Listen: ":2222", HostKey: "/d/ssh_host_ed25519_key", AuthorizedKeys: "/d/authorized_keys", KillGrace: 7 * time.Second,
		}},
		{name: "agent, the default grace", command: Agent{Listen: "127.0.0.1:0", HostKey: "/h", AuthorizedKeys: "/a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.full {
				everyFieldSet(t, reflect.ValueOf(tc.command), reflect.TypeOf(tc.command).Name())
			}
			args := tc.command.Args()
			got, err := Parse(args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", args, err)
			}
			if diff := cmp.Diff(tc.command, got); diff != "" {
				t.Errorf("Parse(%q) (-rendered +parsed):\n%s", args, diff)
			}
		})
	}
}

// everyFieldSet fails for a zero field of v, looking into structs, the
// struct a pointer points to and a slice's first element.
func everyFieldSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			t.Errorf("%s is unset: the round trip would not test it", path)
			return
		}
		everyFieldSet(t, v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			everyFieldSet(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("%s is empty: the round trip would not test it", path)
			return
		}
		everyFieldSet(t, v.Index(0), path+"[0]")
	default:
		if v.IsZero() {
			t.Errorf("%s is unset: the round trip would not test it", path)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	setup := "setup --secret=/s --dir=/d --run-key=run --next-prefix=next-"
	wait := "wait --dir=/d --wait-hostfile=/h --wait-port=2222 --wait-key=id --wait-known-hosts=kh --ready-timeout=30s"
	tests := []struct {
		name, args, wantErr string
	}{
		{name: "nothing", args: "", wantErr: "no command given"},
		{name: "an unknown command", args: "serve --listen=:1", wantErr: `unknown command "serve"`},
		{name: "an unknown flag", args: setup + " --secrets=/x", wantErr: "unknown flag: --secrets"},
		{name: "setup without its directories", args: "setup --run-key=run --next-prefix=next-", wantErr: "--secret, --dir, --run-key and --next-prefix are needed"},
		{name: "a run that is no number", args: setup + " --run=$(TORUS_MPI_RESTART_ATTEMPT)", wantErr: `--run="$(TORUS_MPI_RESTART_ATTEMPT)": want a number`},
		{name: "a file without a mode", args: setup + " --file=key:name", wantErr: `"key:name": want KEY:NAME:MODE`},
		{name: "a mode that is not octal", args: setup + " --keyed-file=key:name:0900", wantErr: `mode "0900" is not an octal permission`},
		{name: "wait flags without the hostfile", args: setup + " --wait-port=2222", wantErr: "the wait needs --wait-hostfile"},
		{name: "a wait on no port", args: strings.Replace(wait, "--wait-port=2222", "--wait-port=0", 1) + " -- true", wantErr: "--wait-port=0: want a port"},
		{name: "a wait that logs in without a key", args: strings.Replace(wait, " --wait-key=id", "", 1) + " -- true", wantErr: "the wait needs --wait-key, or --wait-host-key-only"},
		{name: "an unbounded wait", args: strings.Replace(wait, " --ready-timeout=30s", "", 1) + " -- true", wantErr: "positive --ready-timeout"},
		{name: "a wait with no command", args: wait, wantErr: "usage: wait"},
		{name: "an agent without its keys", args: "agent --listen=:2222", wantErr: "--listen, --host-key and --authorized-keys are needed"},
		{name: "an agent given a command", args: "agent --listen=:2222 --host-key=/h --authorized-keys=/a -- sh", wantErr: "the agent runs no command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.Fields(tc.args))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) = %#v, %v; want an error containing %q", tc.args, c, err, tc.wantErr)
			}
		})
	}
}

// A command line written by hand, in any order and with flags' values as
// separate words, reads as the one Args renders.
func TestParseTakesFlagsInAnyOrder(t *testing.T) {
	got, err := Parse(strings.Fields("agent --kill-grace 2s --authorized-keys /a --host-key /h --listen :2222"))
	if err != nil {
		t.Fatal(err)
	}
	want := Agent{Listen: ":2222", HostKey: "/h", AuthorizedKeys: "/a", KillGrace: 2 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
