package mpi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSSHDCommand(t *testing.T) {
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/home/mpiuser/.ssh", []string{"/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.ssh/sshd_config"}},
		{"/root/.ssh/", []string{"/usr/sbin/sshd", "-De", "-f", "/root/.ssh/sshd_config"}},
	} {
		if diff := cmp.Diff(tc.want, SSHDCommand(tc.path)); diff != "" {
			t.Errorf("SSHDCommand(%q) (-want,+got):\n%s", tc.path, diff)
		}
	}
}
