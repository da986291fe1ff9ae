package migrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestRewriteWorkerCommand(t *testing.T) {
	const cfg = "/home/u/.ssh/sshd_config"
	cases := []struct {
		name              string
		command, args     []string
		wantCommand       []string
		wantArgs          []string
		wantSSHD          bool
		wantLevels        []Level
		wantFieldsChanged []string
	}{
		{
			name:        "no command: Torus's sshd",
			wantCommand: []string{"/usr/sbin/sshd"}, wantArgs: []string{"-De", "-f", cfg},
			wantSSHD: true, wantLevels: []Level{LevelChange},
		},
		{
			name:    "mpi-operator's non-root samples: -f rewritten in args",
			command: []string{"/usr/sbin/sshd"}, args: []string{"-De", "-f", "/home/mpiuser/.sshd_config"},
			wantCommand: []string{"/usr/sbin/sshd"}, wantArgs: []string{"-De", "-f", cfg},
			wantSSHD: true, wantLevels: []Level{LevelChange, LevelWarning},
		},
		{
			name:     "everything in args (the image's entrypoint is kept)",
			args:     []string{"/usr/sbin/sshd", "-De", "-f", "/x"},
			wantArgs: []string{"/usr/sbin/sshd", "-De", "-f", cfg},
			wantSSHD: true, wantLevels: []Level{LevelChange, LevelWarning},
		},
		{
			name:        "already Torus's",
			command:     []string{"/usr/sbin/sshd", "-De", "-f", cfg},
			wantCommand: []string{"/usr/sbin/sshd", "-De", "-f", cfg},
			wantSSHD:    true,
		},
		{
			name:        "no -f: added where the flags are",
			command:     []string{"sshd", "-D", "-e"},
			wantCommand: []string{"sshd", "-D", "-e", "-f", cfg},
			wantSSHD:    true, wantLevels: []Level{LevelChange},
		},
		{
			name:    "combined flags with the file attached, a port and options",
			command: []string{"/usr/sbin/sshd"}, args: []string{"-Def/etc/ssh/custom", "-p", "22", "-o", "Port=23", "-o", "LogLevel=DEBUG"},
			wantCommand: []string{"/usr/sbin/sshd"}, wantArgs: []string{"-De", "-f", cfg, "-o", "LogLevel=DEBUG"},
			wantSSHD: true, wantLevels: []Level{LevelChange, LevelWarning, LevelWarning, LevelWarning},
		},
		{
			name:        "without -D sshd detaches",
			command:     []string{"/usr/sbin/sshd", "-f", cfg},
			wantCommand: []string{"/usr/sbin/sshd", "-f", cfg},
			wantSSHD:    true, wantLevels: []Level{LevelWarning},
		},
		{
			name:        "a shell that starts sshd is left alone",
			command:     []string{"sh", "-c", "prepare && /usr/sbin/sshd -De"},
			wantCommand: []string{"sh", "-c", "prepare && /usr/sbin/sshd -De"},
			wantLevels:  []Level{LevelWarning},
		},
		{
			name:       "arguments for the image's entrypoint are left alone",
			args:       []string{"--workers"},
			wantArgs:   []string{"--workers"},
			wantLevels: []Level{LevelWarning},
		},
		{
			name:        "a worker that runs no sshd is left alone",
			command:     []string{"sleep", "infinity"},
			wantCommand: []string{"sleep", "infinity"},
			wantLevels:  []Level{LevelWarning},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Command: tc.command, Args: tc.args}
			var r reporter
			sshd := rewriteWorkerCommand(c, "/home/u/.ssh", newPath("c"), &r)
			var gotLevels []Level
			for _, f := range r.findings {
				gotLevels = append(gotLevels, f.Level)
			}
			got := []any{c.Command, c.Args, sshd, gotLevels}
			want := []any{tc.wantCommand, tc.wantArgs, tc.wantSSHD, tc.wantLevels}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s\nfindings:\n%s", diff, findingsText(r.findings))
			}
		})
	}
}

func TestEnsureSSHDProbe(t *testing.T) {
	tcp := func(port int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}}
	}
	exec := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	cases := []struct {
		name                   string
		startup, readiness     *corev1.Probe
		wantStartup, wantReady *corev1.Probe
		wantLevel              []Level
	}{
		{"none: a TCP startup probe on 2222", nil, nil, &corev1.Probe{ProbeHandler: tcp(2222).ProbeHandler, PeriodSeconds: 1, FailureThreshold: 120}, nil, []Level{LevelChange}},
		{"readiness on port 22: moved to 2222", nil, tcp(22), nil, tcp(2222), []Level{LevelWarning}},
		{"startup on port 22: moved to 2222", tcp(22), nil, tcp(2222), nil, []Level{LevelWarning}},
		{"readiness on 2222 already", nil, tcp(2222), nil, tcp(2222), nil},
		{"an exec probe stays", nil, exec, nil, exec, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{StartupProbe: tc.startup.DeepCopy(), ReadinessProbe: tc.readiness.DeepCopy()}
			var r reporter
			ensureSSHDProbe(c, newPath("c"), &r)
			var levels []Level
			for _, f := range r.findings {
				levels = append(levels, f.Level)
			}
			if diff := cmp.Diff([]any{tc.wantStartup, tc.wantReady, tc.wantLevel}, []any{c.StartupProbe, c.ReadinessProbe, levels}); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
