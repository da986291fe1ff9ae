package diagnosis

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// What MPI launchers and ssh print when a job cannot start or loses a
// rank, as the kubelet keeps the end of it, read into a reason, a detail,
// a fix and the line that says so.
func TestReadOutput(t *testing.T) {
	c := failureContext{job: "pi", namespace: "team", sshdConfig: "/home/mpiuser/.ssh/sshd_config"}
	cases := map[string]struct {
		msg        string
		wantReason string
		wantDetail string
		wantQuote  []string
	}{
		"Hydra's proxy cannot resolve the launcher it connects back to": {
			msg: "[proxy:0:0@pi-node-0-0] HYDU_sock_connect (lib/utils/sock.c:110): unable to get host address for pi-launcher-0-0\n" +
				"[proxy:0:0@pi-node-0-0] main (proxy/pmip.c:121): unable to connect to server pi-launcher-0-0 at port 37439 (check for firewalls!)\n",
			wantReason: ReasonHostNotResolved,
			wantDetail: "pi-launcher-0-0 did not resolve",
			wantQuote:  []string{"[proxy:0:0@pi-node-0-0] HYDU_sock_connect (lib/utils/sock.c:110): unable to get host address for pi-launcher-0-0"},
		},
		"ssh cannot resolve a worker": {
			msg:        "ssh: Could not resolve hostname pi-node-0-1.pi: Name or service not known\r\n",
			wantReason: ReasonHostNotResolved,
			wantDetail: "pi-node-0-1.pi did not resolve",
			wantQuote:  []string{"ssh: Could not resolve hostname pi-node-0-1.pi: Name or service not known"},
		},
		"no sshd on a worker, under Open MPI's banner": {
			msg: "ssh: connect to host pi-node-0-1.pi port 2222: Connection refused\n" +
				"--------------------------------------------------------------------------\n" +
				"ORTE was unable to reliably start one or more daemons.\n" +
				"--------------------------------------------------------------------------\n",
			wantReason: ReasonSSHConnectionRefused,
			wantDetail: "ssh to pi-node-0-1.pi port 2222 was refused: no sshd listens there",
			wantQuote:  []string{"ssh: connect to host pi-node-0-1.pi port 2222: Connection refused"},
		},
		"a worker behind a policy that drops its traffic": {
			msg:        "ssh: connect to host pi-node-0-0.pi port 2222: Connection timed out\n",
			wantReason: ReasonHostUnreachable,
			wantDetail: "ssh to pi-node-0-0.pi port 2222: connection timed out",
			wantQuote:  []string{"ssh: connect to host pi-node-0-0.pi port 2222: Connection timed out"},
		},
		"a worker that does not prove the job's host key": {
			msg: "No ED25519 host key is known for [pi-node-0-0.pi]:2222 and you have requested strict checking.\n" +
				"Host key verification failed.\n",
			wantReason: ReasonHostKeyMismatch,
			wantDetail: "a worker's sshd did not present the job's host key",
			wantQuote:  []string{"No ED25519 host key is known for [pi-node-0-0.pi]:2222 and you have requested strict checking."},
		},
		"a worker that refuses the job's key": {
			msg:        "mpiuser@pi-node-0-0.pi: Permission denied (publickey).\n",
			wantReason: ReasonSSHAuthFailed,
			wantDetail: "a worker's sshd refused the job's key",
			wantQuote:  []string{"mpiuser@pi-node-0-0.pi: Permission denied (publickey)."},
		},
		"Open MPI reports a killed rank": {
			msg:        "mpirun noticed that process rank 3 with PID 0 on node pi-node-0-1 exited on signal 9 (Killed).\n",
			wantReason: ReasonRankKilled,
			wantDetail: "rank 3 on pi-node-0-1 was killed by signal 9 (SIGKILL)",
			wantQuote:  []string{"mpirun noticed that process rank 3 with PID 0 on node pi-node-0-1 exited on signal 9 (Killed)."},
		},
		"Hydra reports a killed rank": {
			msg: "===================================================================================\n" +
				"=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n" +
				"=   RANK 2 PID 81 RUNNING AT pi-node-0-1\n" +
				"=   KILLED BY SIGNAL: 9 (Killed)\n" +
				"===================================================================================\n",
			wantReason: ReasonRankKilled,
			wantDetail: "rank 2 was killed by signal 9 (SIGKILL)",
			wantQuote:  []string{"=   KILLED BY SIGNAL: 9 (Killed)"},
		},
		"an unrecognised failure quotes the last meaningful lines, rules and blanks skipped": {
			msg:       "loading data\nepoch 1\nepoch 2\nloss is nan\n\n-----\n",
			wantQuote: []string{"epoch 1", "epoch 2", "loss is nan"},
		},
		"a Python exception, with the frame that raised it": {
			msg:        "loading data\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nValueError: bad shape\n\n-----\n",
			wantReason: ReasonPythonException,
			wantDetail: "a rank raised ValueError: bad shape",
			wantQuote:  []string{`File "train.py", line 3, in <module>`, "ValueError: bad shape"},
		},
		"a rank's exception names the rank mpi4py's abort names": {
			msg: "Traceback (most recent call last):\n  File \"/opt/hang.py\", line 9, in <module>\nRuntimeError: rank 1 gives up\n" +
				"--------------------------------------------------------------------------\n" +
				"MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n",
			wantReason: ReasonPythonException,
			wantDetail: "rank 1 raised RuntimeError: rank 1 gives up",
		},
		"an exception in a rank's own words outweighs the launcher's verdict on another": {
			msg: "[1,3]<stderr>:Traceback (most recent call last):\n[1,3]<stderr>:  File \"train.py\", line 7, in <module>\n[1,3]<stderr>:KeyError: 'labels'\n" +
				"mpirun noticed that process rank 0 with PID 0 on node pi-node-0-0 exited on signal 9 (Killed).\n",
			wantReason: ReasonPythonException,
			wantDetail: "rank 3 raised KeyError: 'labels'",
			wantQuote:  []string{`[1,3]<stderr>:  File "train.py", line 7, in <module>`, "[1,3]<stderr>:KeyError: 'labels'"},
		},
		"a library's warning does not outweigh the program's exception": {
			msg: "host:41:41 [0] misc/utils.cc:90 NCCL WARN Could not find real path of /sys/class/net/eth9\n" +
				"Traceback (most recent call last):\n  File \"train.py\", line 7, in <module>\nKeyError: 'labels'\n",
			wantReason: ReasonPythonException,
			wantDetail: "a rank raised KeyError: 'labels'",
		},
		"control characters are escaped, never passed to a terminal": {
			msg:       "\x1b[31mfatal\x1b[0m: bad\x07 input\n",
			wantQuote: []string{`\x1b[31mfatal\x1b[0m: bad\x07 input`},
		},
		"key material is never quoted": {
			msg: "debug: writing key\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDxx\n-----END OPENSSH PRIVATE KEY-----\n" +
				"AAAAC3NzaC1lZDI1NTE5AAAAIPGkdOZXVz2uXW6V0vRQ1QYu9wDpv0fGzuK2aD8jL3Vb\nexit\n",
			wantQuote: []string{"debug: writing key", "exit"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := readOutput(tc.msg, c)
			if got.reason != tc.wantReason || got.detail != tc.wantDetail {
				t.Errorf("reason, detail = %q, %q; want %q, %q", got.reason, got.detail, tc.wantReason, tc.wantDetail)
			}
			if tc.wantReason != "" && !strings.Contains(got.fix, " ") {
				t.Errorf("a recognised failure has no fix: %q", got.fix)
			}
			if tc.wantQuote == nil {
				return
			}
			if diff := cmp.Diff(tc.wantQuote, got.quote); diff != "" {
				t.Errorf("quote (-want,+got):\n%s", diff)
			}
		})
	}
}

// Every example the troubleshooting guide shows is recognised as the
// failure it illustrates, and none as another.
func TestOutputFailureExamples(t *testing.T) {
	for _, f := range slices.Concat(launchFailures, programFailures) {
		if len(f.examples) == 0 {
			t.Errorf("%s has no example", f.reason)
		}
		for _, e := range f.examples {
			if got := readOutput(e, failureContext{job: "pi", namespace: "ns", sshdConfig: "/x/sshd_config"}).reason; got != f.reason {
				t.Errorf("%q read as %q, want %q", e, got, f.reason)
			}
		}
	}
	for _, d := range OutputFailureDocs("NAME", "NS", "<sshAuthMountPath>/sshd_config") {
		if d.Reason == "" || d.Detail == "" || d.Fix == "" {
			t.Errorf("%+v: a reason, a detail and a fix each", d)
		}
	}
}
