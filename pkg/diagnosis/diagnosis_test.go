package diagnosis

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func worker(index string, status corev1.PodStatus) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-" + index + "-abcde", Labels: map[string]string{
			api.LabelJobName: "pi", api.LabelRole: api.RoleWorker, "batch.kubernetes.io/job-completion-index": index,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "node", Image: "mpi:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}},
		}}},
		Status: status,
	}
}

func terminated(reason string, code int32, at time.Time) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, FinishedAt: metav1.NewTime(at)}},
	}}}
}

func terminatedWith(code int32, at time.Time, output string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: code, FinishedAt: metav1.NewTime(at), Message: output}},
	}}}
}

// agentPod is a pod of a job whose pods run torus-launch.
func agentPod(role, index string, status corev1.PodStatus) corev1.Pod {
	p := worker(index, status)
	if role == api.RoleLauncher {
		p.Name = "pi-launcher-0-0-abcde"
		p.Labels[api.LabelRole] = api.RoleLauncher
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: mpi.LaunchVolume, MountPath: mpi.LaunchBinDir}}
	return p
}

func TestPods(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	placement := mpi.NewPlacement("pi", 4, 4, false)
	cases := map[string]struct {
		pods []corev1.Pod
		want []string
	}{
		"healthy pods say nothing": {
			pods: []corev1.Pod{worker("0", corev1.PodStatus{Phase: corev1.PodRunning})},
		},
		"OOMKilled names the limit and the flag": {
			pods: []corev1.Pod{worker("3", terminated("OOMKilled", 137, t0))},
			want: []string{"worker-3 (ranks 12-15) OOMKilled: memory limit 16Gi exceeded; raise --memory (spec.trainer.resourcesPerNode limits) [pod pi-node-0-3-abcde]"},
		},
		"the earliest failure comes first: the others died of it": {
			pods: []corev1.Pod{
				worker("0", terminated("Error", 1, t0.Add(2*time.Second))),
				worker("2", terminated("Error", 139, t0)),
			},
			want: []string{
				"worker-2 (ranks 8-11) Error: container node exited with code 139 (SIGSEGV); see kubectl mpi logs pi --worker 2 [pod pi-node-0-2-abcde]",
				"worker-0 (ranks 0-3) Error: container node exited with code 1; see kubectl mpi logs pi --worker 0 [pod pi-node-0-0-abcde]",
			},
		},
		"a worker no node can take, in the scheduler's words": {
			pods: []corev1.Pod{worker("2", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", LastTransitionTime: metav1.NewTime(t0),
			}}})},
			want: []string{"worker-2 (ranks 8-11) Unschedulable: the scheduler says: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.; " +
				"ask for what one node can give (--cpu, --memory, --gpus per worker), or add nodes that have it [pod pi-node-0-2-abcde]"},
		},
		"an image a node must not pull": {
			pods: []corev1.Pod{worker("0", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "node", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}},
			}}})},
			want: []string{`worker-0 (ranks 0-3) ErrImageNeverPull: image "mpi:1" is not on the node and its pull policy is Never; ` +
				"load the image onto the nodes, or set imagePullPolicy IfNotPresent in the runtime [pod pi-node-0-0-abcde]"},
		},
		"a container the kubelet restarts: a moment of a crash loop, not the job's end": {
			pods: []corev1.Pod{func() corev1.Pod {
				p := worker("1", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
					Name: "node", RestartCount: 2, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 255}},
				}}})
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				return p
			}()},
			want: []string{"worker-1 (ranks 4-7) Error: container node exited with code 255 and is restarted by the kubelet (restarted 2 times); " +
				"see kubectl mpi logs pi --worker 1 [pod pi-node-0-1-abcde]"},
		},
		"a container that exited once, restarted at once by the kubelet": {
			pods: []corev1.Pod{func() corev1.Pod {
				p := worker("1", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
					Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}},
				}}})
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				return p
			}()},
			want: []string{"worker-1 (ranks 4-7) Error: container node exited with code 1 and is restarted by the kubelet; " +
				"see kubectl mpi logs pi --worker 1 [pod pi-node-0-1-abcde]"},
		},
		"a container the kubelet holds back in a crash loop": {
			pods: []corev1.Pod{worker("0", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "node", RestartCount: 1, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			}}})},
			want: []string{"worker-0 (ranks 0-3) CrashLoopBackOff: container node keeps exiting (restarted once); " +
				"see kubectl mpi logs pi --worker 0 --previous [pod pi-node-0-0-abcde]"},
		},
		"an SSH setup the container runtime cannot start": {
			pods: []corev1.Pod{worker("0", corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{
				Name: mpi.SSHInitContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					Reason: "StartError", ExitCode: 128, Message: `failed to create containerd task: failed to create shim task: OCI runtime create failed: ` +
						`runc create failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`,
				}},
			}}})},
			want: []string{`worker-0 (ranks 0-3) StartError: container mpi-ssh-setup could not start: exec: "sh": executable file not found in $PATH; ` +
				"the SSH setup failed: the image needs sh, mkdir, chmod, cp, id, cat, tail, sleep (see kubectl logs pi-node-0-0-abcde -c mpi-ssh-setup) [pod pi-node-0-0-abcde]"},
		},
		"a launcher that could not reach a worker, in ssh's words": {
			pods: []corev1.Pod{func() corev1.Pod {
				p := worker("0", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
					Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						Reason: "Error", ExitCode: 255, FinishedAt: metav1.NewTime(t0),
						Message: "ssh: connect to host pi-node-0-1.pi port 2222: Connection refused\r\n" +
							"--------------------------------------------------------------------------\nORTE was unable to reliably start one or more daemons.\n",
					}},
				}}})
				p.Name, p.Namespace = "pi-launcher-0-0-abcde", "team"
				p.Labels[api.LabelRole] = api.RoleLauncher
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: mpi.SSHVolume, MountPath: "/home/mpiuser/.ssh", SubPath: mpi.SSHDirSubPath}}
				return p
			}()},
			want: []string{`launcher SSHConnectionRefused: container node exited with code 255: ssh to pi-node-0-1.pi port 2222 was refused: no sshd listens there; ` +
				`it printed: "ssh: connect to host pi-node-0-1.pi port 2222: Connection refused"; ` +
				"the workers must run sshd -De -f /home/mpiuser/.ssh/sshd_config and keep it up while the job runs: see their logs (kubectl mpi logs pi) [pod pi-launcher-0-0-abcde]"},
		},
		"a launcher refused by workers whose sshd answered their probes on that port: a NetworkPolicy": {
			pods: []corev1.Pod{
				func() corev1.Pod {
					p := worker("0", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
						Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
							Reason: "Error", ExitCode: 255, FinishedAt: metav1.NewTime(t0),
							Message: "ssh: connect to host pi-node-0-0.pi port 2222: Connection refused\r\n",
						}},
					}}})
					p.Name, p.Namespace = "pi-launcher-0-0-abcde", "team"
					p.Labels[api.LabelRole] = api.RoleLauncher
					return p
				}(),
				func() corev1.Pod {
					p := worker("0", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
						Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(t0.Add(time.Second))}},
					}}})
					p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2222)}}}
					return p
				}(),
			},
			want: []string{`launcher SSHConnectionRefused: container node exited with code 255: ssh to pi-node-0-0.pi port 2222 was refused while every worker's sshd answered the kubelet's probe there: ` +
				`a NetworkPolicy rejects the launcher's connection; it printed: "ssh: connect to host pi-node-0-0.pi port 2222: Connection refused"; ` +
				"let the job's pods reach each other: annotate the namespace or the runtime torus-mpi.io/network-policy=restricted for a policy admitting the job's own pods, " +
				"or allow them in the namespace's policies (kubectl get networkpolicy -n team) [pod pi-launcher-0-0-abcde]"},
		},
		"an application's failure, in its own last lines": {
			pods: []corev1.Pod{worker("2", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					Reason: "Error", ExitCode: 1, Message: "epoch 1 loss 0.3\nValueError: shapes (4,) and (5,) not aligned\n",
				}},
			}}})},
			want: []string{`worker-2 (ranks 8-11) Error: container node exited with code 1; it printed: "epoch 1 loss 0.3" "ValueError: shapes (4,) and (5,) not aligned"; ` +
				"see kubectl mpi logs pi --worker 2 [pod pi-node-0-2-abcde]"},
		},
		"a worker evicted, then the launcher that lost it: the eviction first, in Kubernetes' words": {
			pods: []corev1.Pod{
				agentPod(api.RoleLauncher, "0", terminatedWith(75, t0.Add(2*time.Second),
					"[prterun] daemon lost\ntorus-launch: mpirun exited 1 after the job lost pi-node-0-1.pi: its pod was stopped while it ran the job; "+
						"the job restarts without counting against its restart budget\n")),
				func() corev1.Pod {
					p := agentPod(api.RoleWorker, "1", terminatedWith(75, t0.Add(time.Second), ""))
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
						Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(t0)}}
					return p
				}(),
			},
			want: []string{
				"worker-1 (ranks 4-7) EvictionByEvictionAPI: it was evicted (a node drain, or another use of the Eviction API) (Eviction API: evicting) [pod pi-node-0-1-abcde]",
				`launcher WorldLost: the job lost a host to something other than the program (exit 75); it printed: "[prterun] daemon lost" ` +
					`"torus-launch: mpirun exited 1 after the job lost pi-node-0-1.pi: its pod was stopped while it ran the job; the job restarts without counting against its restart budget" [pod pi-launcher-0-0-abcde]`,
			},
		},
		"a worker's agent stopped mid-run: stopped, not the program's error": {
			pods: []corev1.Pod{agentPod(api.RoleWorker, "2", terminatedWith(75, t0, ""))},
			want: []string{"worker-2 (ranks 8-11) Stopped: its pod was stopped while it ran the job's ranks (exit 75) [pod pi-node-0-2-abcde]"},
		},
		"exit 75 from OpenSSH's sshd is its own": {
			pods: []corev1.Pod{worker("2", terminatedWith(75, t0, ""))},
			want: []string{"worker-2 (ranks 8-11) Error: container node exited with code 75; see kubectl mpi logs pi --worker 2 [pod pi-node-0-2-abcde]"},
		},
		"a worker preempted by the scheduler": {
			pods: []corev1.Pod{func() corev1.Pod {
				p := worker("0", corev1.PodStatus{Phase: corev1.PodRunning})
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
					Reason: "PreemptionByScheduler", Message: "default-scheduler: preempting to accommodate a higher priority pod", LastTransitionTime: metav1.NewTime(t0)}}
				return p
			}()},
			want: []string{"worker-0 (ranks 0-3) PreemptionByScheduler: the scheduler preempted it for a pod of higher priority " +
				"(default-scheduler: preempting to accommodate a higher priority pod) [pod pi-node-0-0-abcde]"},
		},
		"terminal failures before transient ones": {
			pods: []corev1.Pod{
				worker("1", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
					Name: "node", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}},
				}}}),
				worker("2", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}),
			},
			want: []string{
				"worker-2 (ranks 8-11) Evicted: The node was low on resource: memory.; the node ran short of a resource: request what the job needs (--cpu, --memory) so the scheduler places it where it fits [pod pi-node-0-2-abcde]",
				`worker-1 (ranks 4-7) ImagePullBackOff: image "mpi:1" is not on the node, and pulling it failed: not found; check the image name and tag, that the node reaches its registry, and the pull secret for private registries; or load the image onto the nodes [pod pi-node-0-1-abcde]`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, f := range Pods(tc.pods, placement) {
				got = append(got, f.Message())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want,+got):\n%s", diff)
			}
		})
	}
}

// Every pod state the troubleshooting guide shows is explained, with a
// reason, a detail and a fix.
func TestPodFailureDocs(t *testing.T) {
	docs := PodFailureDocs()
	// The example pods, and the pod without its sandbox.
	if len(docs) != len(podExamples)+1 {
		t.Fatalf("%d of %d example pods explained", len(docs), len(podExamples)+1)
	}
	for _, d := range docs {
		if d.Reason == "" || d.Detail == "" || d.Fix == "" {
			t.Errorf("%+v: a reason, a detail and a fix each", d)
		}
	}
}

// BenchmarkPodsHealthy is a reconcile's diagnosis of a large job whose
// pods all run: the operator's status reads it on every event of a pod.
func BenchmarkPodsHealthy(b *testing.B) {
	const workers = 4096
	placement := mpi.NewPlacement("pi", workers, 1, false)
	pods := make([]corev1.Pod, workers)
	for i := range pods {
		pods[i] = worker(strconv.Itoa(i), corev1.PodStatus{
			Phase:                 corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: mpi.SSHInitContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "node", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		if f := Pods(pods, placement); len(f) != 0 {
			b.Fatalf("findings for running pods: %v", f)
		}
	}
}
