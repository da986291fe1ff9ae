package webhook

import (
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// What upstream Trainer applies of a runtime patch, Torus applies; what
// makes a job Torus's (its keys, hostfile, init container, gate) stays
// refused, each refusal naming the field and the fix.
func TestRuntimePatchRefusals(t *testing.T) {
	const pod = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec."
	ctr := func(f func(*trainer.ContainerPatch)) func(*trainer.PodSpecPatch) {
		return func(ps *trainer.PodSpecPatch) {
			c := trainer.ContainerPatch{Name: mpi.TrainerContainer}
			f(&c)
			ps.Containers = []trainer.ContainerPatch{c}
		}
	}
	cases := map[string]struct {
		patch   func(*trainer.PodSpecPatch)
		manager string
		// wantErr is the refusal; empty admits the patch.
		wantErr string
	}{
		"a volume, its mount, pull secrets, a service account": {patch: func(ps *trainer.PodSpecPatch) {
			ps.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets"}}}}
			ps.Containers = []trainer.ContainerPatch{{Name: mpi.TrainerContainer, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}
			ps.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
			ps.ServiceAccountName = ptr.To("trainer")
		}},
		"a mount beside the SSH directory, in the user's home": {patch: ctr(func(c *trainer.ContainerPatch) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/home/mpiuser/data"}}
		})},
		"a manager that is not a domain-prefixed path": {manager: "kubectl-mpi", patch: func(*trainer.PodSpecPatch) {},
			wantErr: `spec.runtimePatches[0].manager: Invalid value: "kubectl-mpi": must be a domain-prefixed path`},
		"the volume of the job's keys": {patch: func(ps *trainer.PodSpecPatch) {
			ps.Volumes = []corev1.Volume{{Name: mpi.SSHSecretVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, wantErr: pod + "volumes[0].name: Forbidden: mpi-ssh-secret is the volume Torus gives the job's SSH keys and hostfile: give your volume another name"},
		"a mount of the job's key volume": {patch: ctr(func(c *trainer.ContainerPatch) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: mpi.SSHSecretVolume, MountPath: "/keys"}}
		}), wantErr: pod + "containers[0].volumeMounts[0].name: Forbidden: mpi-ssh-secret holds the job's SSH keys or hostfile"},
		"a mount over the SSH directory": {patch: ctr(func(c *trainer.ContainerPatch) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: "/home/mpiuser/.ssh/"}}
		}), wantErr: pod + "containers[0].volumeMounts[0].mountPath: Forbidden: Torus mounts the job's SSH files, hostfile and launch agent at or under /home/mpiuser/.ssh, /etc/mpi, /etc/passwd, /etc/torus-mpi, /opt/torus-mpi: mount the volume elsewhere"},
		"a mount over the launch agent's directory": {patch: ctr(func(c *trainer.ContainerPatch) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: "/opt/torus-mpi/bin"}}
		}), wantErr: pod + "containers[0].volumeMounts[0].mountPath: Forbidden"},
		"a mount over Torus's directory of the keys' volumes": {patch: ctr(func(c *trainer.ContainerPatch) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: "/etc/torus-mpi"}}
		}), wantErr: pod + "containers[0].volumeMounts[0].mountPath: Forbidden"},
		"the volume of the launch agent's image": {patch: func(ps *trainer.PodSpecPatch) {
			ps.Volumes = []corev1.Volume{{Name: mpi.LaunchImageVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, wantErr: pod + "volumes[0].name: Forbidden: mpi-launch-image is the volume Torus gives"},
		"a mount inside the hostfile's directory": {patch: ctr(func(c *trainer.ContainerPatch) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: "/etc/mpi/hostfile"}}
		}), wantErr: pod + "containers[0].volumeMounts[0].mountPath: Forbidden"},
		"Torus's init container": {patch: func(ps *trainer.PodSpecPatch) {
			ps.InitContainers = []trainer.ContainerPatch{{Name: mpi.SSHInitContainer, SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}}}
		}, wantErr: pod + "initContainers[0].name: Forbidden: mpi-ssh-setup is Torus's init container, which lays out the job's SSH keys"},
		"a container the runtime lacks": {patch: func(ps *trainer.PodSpecPatch) {
			ps.Containers = []trainer.ContainerPatch{{Name: "sidecar", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
		}, wantErr: pod + `containers[0].name: Invalid value: "sidecar": the runtime's node job has no such container: a runtime patch changes those it has (node)`},
		"an init container the runtime lacks": {patch: func(ps *trainer.PodSpecPatch) {
			ps.InitContainers = []trainer.ContainerPatch{{Name: "fetch"}}
		}, wantErr: pod + `initContainers[0].name: Invalid value: "fetch": the runtime's node job has no such init container: a runtime patch changes those it has (none)`},
		"env of the MPI container, which is the TrainJob's": {patch: ctr(func(c *trainer.ContainerPatch) {
			c.Env = []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}}
		}), wantErr: pod + "containers[0].env: Forbidden: the node container's environment is the TrainJob's: set it in spec.trainer.env"},
		"Torus's scheduling gate": {patch: func(ps *trainer.PodSpecPatch) {
			ps.SchedulingGates = []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}}
		}, wantErr: pod + "schedulingGates[0].name: Forbidden: gates under torus-mpi.io/ are Torus's"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj, rt := baseline(t)
			patchPod(tc.patch)(tj, rt)
			if tc.manager != "" {
				tj.Spec.RuntimePatches[0].Manager = tc.manager
			}
			errs := validateTrainJob(tj, rt, mpi.DefaultMaxNodes)
			if tc.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.wantErr) {
				t.Errorf("refusal = %v, want %q", got, tc.wantErr)
			}
		})
	}
}

// A job's runtime patches change only while it is suspended, before or
// after the change, as upstream Trainer has it.
func TestRuntimePatchChange(t *testing.T) {
	patched := func(suspend bool, zone string) *trainer.TrainJob {
		tj, rt := baseline(t)
		patchPod(func(ps *trainer.PodSpecPatch) { ps.NodeSelector = map[string]string{"zone": zone} })(tj, rt)
		tj.Spec.Suspend = ptr.To(suspend)
		return tj
	}
	cases := map[string]struct {
		old, new *trainer.TrainJob
		wantErr  bool
	}{
		"unchanged while running":              {old: patched(false, "a"), new: patched(false, "a")},
		"changed while suspended":              {old: patched(true, "a"), new: patched(true, "b")},
		"changed as the job resumes (Kueue)":   {old: patched(true, "a"), new: patched(false, "b")},
		"changed as the job suspends":          {old: patched(false, "a"), new: patched(true, "b")},
		"changed while running":                {old: patched(false, "a"), new: patched(false, "b"), wantErr: true},
		"removed while running, all of them":   {old: patched(false, "a"), new: func() *trainer.TrainJob { tj, _ := baseline(t); return tj }(), wantErr: true},
		"added while running, where none were": {old: func() *trainer.TrainJob { tj, _ := baseline(t); return tj }(), new: patched(false, "a"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := validatePatchChange(tc.old, tc.new)
			if (len(errs) > 0) != tc.wantErr {
				t.Errorf("errors = %v, want error %t", errs, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(errs.ToAggregate().Error(), "spec.runtimePatches: Forbidden: a running job's runtime patches cannot change") {
				t.Errorf("refusal = %v", errs)
			}
		})
	}
}

// A job whose JobSet could not be stored is refused at admission, naming
// what makes it large, instead of waiting with nothing said.
func TestJobSetSize(t *testing.T) {
	big := func(n int) string { return strings.Repeat("x", n) }
	cases := map[string]struct {
		mutate  func(*trainer.TrainJob)
		wantErr string
	}{
		"an ordinary environment": {mutate: func(tj *trainer.TrainJob) {
			tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}, {Name: "CONFIG", Value: big(64 << 10)}}
		}},
		"800 KiB of environment, copied into both pod templates": {mutate: func(tj *trainer.TrainJob) {
			tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "CONFIG", Value: big(800 << 10)}}
		}, wantErr: "spec.trainer.env: Forbidden: the job's JobSet would be 16"},
		"a command of 1,100 KiB": {mutate: func(tj *trainer.TrainJob) {
			tj.Spec.Trainer.Command = []string{"python3", "-c", big(1100 << 10)}
		}, wantErr: "spec.trainer.command: Forbidden: the job's JobSet would be"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj, rt := baseline(t)
			tc.mutate(tj)
			errs := validateTrainJob(tj, rt, mpi.DefaultMaxNodes)
			if tc.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			got := errs.ToAggregate()
			if got == nil || !strings.Contains(got.Error(), tc.wantErr) {
				t.Fatalf("refusal = %v, want %q", got, tc.wantErr)
			}
			if len(got.Error()) > 1024 {
				t.Errorf("the refusal repeats the value: %d bytes", len(got.Error()))
			}
		})
	}
}
