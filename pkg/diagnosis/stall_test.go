package diagnosis

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// stamped prefixes each line as the kubelet does with timestamps=true, one
// second apart from start.
func stamped(start time.Time, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(start.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano))
		b.WriteString(" " + l + "\n")
	}
	return b.String()
}

// launcherOf is the launcher pod of job train: with sshd's configuration
// under /home/mpiuser/.ssh, or with the launch agent.
func launcherOf(agent bool) *corev1.Pod {
	mount := corev1.VolumeMount{Name: mpi.SSHVolume, SubPath: mpi.SSHDirSubPath, MountPath: "/home/mpiuser/.ssh"}
	if agent {
		mount = corev1.VolumeMount{Name: mpi.LaunchVolume, MountPath: mpi.LaunchBinDir}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-launcher-0-0-abcde", Namespace: "team", Labels: map[string]string{api.LabelJobName: "train"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: mpi.TrainerContainer, VolumeMounts: []corev1.VolumeMount{mount}}}},
	}
}

func TestReadQuiet(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	refused := "ssh: connect to host train-node-0-1.train port 2222: Connection refused"
	cases := map[string]struct {
		log        string
		agent      bool
		wantLast   time.Time
		wantReason string
		wantDetail string
		wantFix    string
	}{
		"a worker's sshd gone": {
			log:      stamped(t0, "epoch 1 loss 0.9", refused),
			wantLast: t0.Add(time.Second), wantReason: ReasonSSHConnectionRefused, wantDetail: "ssh to train-node-0-1.train port 2222 was refused: no sshd listens there",
			wantFix: "the workers must run sshd -De -f /home/mpiuser/.ssh/sshd_config",
		},
		"a worker's launch agent gone": {
			log: stamped(t0, "epoch 1 loss 0.9", refused), agent: true,
			wantLast: t0.Add(time.Second), wantReason: ReasonSSHConnectionRefused, wantDetail: "ssh to train-node-0-1.train port 2222 was refused: no launch agent listens there",
			wantFix: "Torus's launch agent",
		},
		"a rank raised while the others wait": {
			log:      stamped(t0, "epoch 1 loss 0.9", "Traceback (most recent call last):", `  File "/opt/hang.py", line 9, in <module>`, "RuntimeError: rank 1 gives up"),
			wantLast: t0.Add(3 * time.Second), wantReason: ReasonPythonException, wantDetail: "a rank raised RuntimeError: rank 1 gives up",
		},
		"a rank out of GPU memory": {
			log:      stamped(t0, "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 10.56 GiB is free."),
			wantLast: t0, wantReason: ReasonCUDAOutOfMemory, wantDetail: "rank 1 ran out of GPU memory: it asked for 16.00 GiB more on GPU 0, which had 10.56 GiB free of 139.80 GiB",
		},
		"a healthy training": {
			log:      stamped(t0, "epoch 1 loss 0.9", "epoch 2 loss 0.7"),
			wantLast: t0.Add(time.Second),
		},
		"a library's warning alone is no failure": {
			log:      stamped(t0, "host:41:41 [0] NCCL WARN Could not find real path of /sys/class/net/eth9", "epoch 1 loss 0.9"),
			wantLast: t0.Add(time.Second),
		},
		"the first line cut by the read's byte limit": {
			log:      "loss 0.5\n" + stamped(t0, "epoch 2 loss 0.7"),
			wantLast: t0,
		},
		"the launcher's wait for a starting worker is no failure": {
			log:      stamped(t0, "torus: waiting for train-node-0-0.train: connect to host train-node-0-0.train port 2222: Connection refused"),
			wantLast: t0,
		},
		"a failure after the wait": {
			log: stamped(t0, "torus: waiting for train-node-0-1.train: connect to host train-node-0-1.train port 2222: Connection refused",
				"Traceback (most recent call last):", `  File "/opt/hang.py", line 9, in <module>`, "RuntimeError: rank 1 gives up"),
			wantLast: t0.Add(3 * time.Second), wantReason: ReasonPythonException, wantDetail: "a rank raised RuntimeError: rank 1 gives up",
		},
		"nothing printed yet": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := ReadQuiet(tc.log, launcherOf(tc.agent))
			if !q.LastOutput.Equal(tc.wantLast) || q.Reason != tc.wantReason || q.Detail != tc.wantDetail {
				t.Errorf("got %v %q %q; want %v %q %q", q.LastOutput, q.Reason, q.Detail, tc.wantLast, tc.wantReason, tc.wantDetail)
			}
			if !strings.Contains(q.Fix, tc.wantFix) {
				t.Errorf("fix %q does not say %q", q.Fix, tc.wantFix)
			}
			if q.Reason != "" && (q.Fix == "" || len(q.Output) == 0) {
				t.Errorf("a failure without a fix or a quote: %+v", q)
			}
		})
	}
}
