package mpi_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestParseCheckpoint(t *testing.T) {
	cases := map[string]struct {
		value   string
		want    *mpi.Checkpoint
		wantErr string
	}{
		"a claim, at the default place": {value: "ckpt", want: &mpi.Checkpoint{Claim: "ckpt", Dir: mpi.DefaultCheckpointDir}},
		"a claim and a directory":       {value: "ckpt:/data/run-1", want: &mpi.Checkpoint{Claim: "ckpt", Dir: "/data/run-1"}},
		"a claim of another namespace":  {value: "team-b/ckpt", wantErr: "a pod mounts claims of its own namespace only, not of team-b"},
		"not a claim's name":            {value: "Ckpt", wantErr: "lowercase RFC 1123 subdomain"},
		"a relative directory":          {value: "ckpt:data", wantErr: `"data" is not a clean absolute directory path`},
		"the root":                      {value: "ckpt:/", wantErr: `"/" is not a clean absolute directory path`},
		"an unclean directory":          {value: "ckpt:/data/../etc", wantErr: "is not a clean absolute directory path"},
		"over the SSH directory":        {value: "ckpt:" + mpi.DefaultSSHPath, wantErr: "would hide or collide with Torus's " + mpi.DefaultSSHPath},
		"above Torus's own files":       {value: "ckpt:/etc", wantErr: "would hide or collide with Torus's /etc/torus-mpi"},
		"under Torus's own files":       {value: "ckpt:/opt/torus-mpi/ckpt", wantErr: "would hide or collide with Torus's /opt/torus-mpi"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := mpi.ParseCheckpoint(tc.value, mpi.DefaultSSHPath)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "set it to CLAIM or CLAIM:/path") {
					t.Fatalf("ParseCheckpoint(%q) = %v, %v; want an error saying %q and what to set", tc.value, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || *got != *tc.want {
				t.Fatalf("ParseCheckpoint(%q) = %+v, %v; want %+v", tc.value, got, err, tc.want)
			}
		})
	}
}

// A checkpoint claim must be one every pod of the job, on any node, can
// mount and write.
func TestCheckpointRefusal(t *testing.T) {
	c := &mpi.Checkpoint{Claim: "ckpt", Dir: mpi.DefaultCheckpointDir}
	claim := func(modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes}}
	}
	deleting := claim(corev1.ReadWriteMany)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	cases := map[string]struct {
		pvc  *corev1.PersistentVolumeClaim
		want string
	}{
		"shared":        {pvc: claim(corev1.ReadWriteOnce, corev1.ReadWriteMany)},
		"missing":       {want: "PersistentVolumeClaim ckpt does not exist in the job's namespace"},
		"one node's":    {pvc: claim(corev1.ReadWriteOnce), want: "cannot be shared by the job's pods: its access modes are [ReadWriteOnce]"},
		"one pod's":     {pvc: claim(corev1.ReadWriteOncePod), want: "use a ReadWriteMany claim"},
		"read-only":     {pvc: claim(corev1.ReadOnlyMany), want: "cannot be shared by the job's pods"},
		"being deleted": {pvc: deleting, want: "is being deleted"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := c.Refusal(tc.pvc)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Refusal = %q, want %q", got, tc.want)
			}
		})
	}
}
