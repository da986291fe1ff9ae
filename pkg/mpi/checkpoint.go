package mpi

import (
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/torus-mpi/torus/api"
)

// The checkpoint place every rank of a job finds (api.AnnotationCheckpointVolume).
const (
	// CheckpointVolume is the pod volume of the job's checkpoint claim.
	CheckpointVolume = "torus-checkpoint"
	// DefaultCheckpointDir is where the claim is mounted when the
	// annotation names no path.
	DefaultCheckpointDir = "/checkpoint"
	// EnvCheckpointDir tells the program where its checkpoints go.
	EnvCheckpointDir = "TORUS_CHECKPOINT_DIR"
	// EnvRunAttempt tells the program which run it is: 0 for the first,
	// n after the job's nth restart (the JobSet's restart count).
	EnvRunAttempt = "TORUS_RESTART_ATTEMPT"
)

// Checkpoint is a PersistentVolumeClaim of the job's namespace mounted at
// Dir in every container that runs ranks, and in the launcher's.
type Checkpoint struct {
	Claim string
	Dir   string
}

// ParseCheckpoint reads api.AnnotationCheckpointVolume: CLAIM[:DIR].
func ParseCheckpoint(v string, sshPath string) (*Checkpoint, error) {
	claim, dir, _ := strings.Cut(v, ":")
	if dir == "" {
		dir = DefaultCheckpointDir
	}
	var problems []string
	if ns, _, other := strings.Cut(claim, "/"); other {
		problems = append(problems, fmt.Sprintf("a pod mounts claims of its own namespace only, not of %s", ns))
	} else {
		problems = append(problems, validation.IsDNS1123Subdomain(claim)...)
	}
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" || !sshPathPattern.MatchString(dir) {
		problems = append(problems, fmt.Sprintf("%q is not a clean absolute directory path of letters, digits, '.', '_', '-' and '/'", dir))
	}
	for _, p := range TorusMountPaths(sshPath) {
		if dir == p || strings.HasPrefix(dir+"/", p+"/") || strings.HasPrefix(p+"/", dir+"/") {
			problems = append(problems, fmt.Sprintf("%s would hide or collide with Torus's %s", dir, p))
		}
	}
	if len(problems) > 0 {
		return nil, &checkpointError{value: v, problems: problems}
	}
	return &Checkpoint{Claim: claim, Dir: dir}, nil
}

// checkpointError is a bad api.AnnotationCheckpointVolume: what is wrong
// with it, each problem in words.
type checkpointError struct {
	value    string
	problems []string
}

func (e *checkpointError) Error() string {
	return fmt.Sprintf("annotation %s=%q: set it to CLAIM or CLAIM:/path, a PersistentVolumeClaim of the job's namespace that every pod can mount and a directory for it (default %s): %s",
		api.AnnotationCheckpointVolume, e.value, DefaultCheckpointDir, strings.Join(e.problems, "; "))
}

// CheckpointProblems is what ParseCheckpoint found wrong, without the
// annotation's name: for a caller that names its own flag.
func CheckpointProblems(err error) string {
	var c *checkpointError
	if errors.As(err, &c) {
		return strings.Join(c.problems, "; ")
	}
	return err.Error()
}

// Apply mounts the claim into the pod's MPI container and tells the
// program where it is and which run this is.
func (c *Checkpoint) Apply(ps *corev1.PodSpec, ctr *corev1.Container) {
	ps.Volumes = UpsertVolume(ps.Volumes, corev1.Volume{
		Name:         CheckpointVolume,
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Claim}},
	})
	ctr.VolumeMounts = UpsertMount(ctr.VolumeMounts, corev1.VolumeMount{Name: CheckpointVolume, MountPath: c.Dir})
	ctr.Env = UpsertEnv(ctr.Env, c.Env()...)
}

// Refusal says why a claim cannot be the job's checkpoint place, or "":
// every pod of the job, on whichever node, must mount it and write to it.
func (c *Checkpoint) Refusal(pvc *corev1.PersistentVolumeClaim) string {
	if pvc == nil {
		return fmt.Sprintf("PersistentVolumeClaim %s does not exist in the job's namespace: create it (ReadWriteMany) first, or name another", c.Claim)
	}
	if !pvc.DeletionTimestamp.IsZero() {
		return fmt.Sprintf("PersistentVolumeClaim %s is being deleted", c.Claim)
	}
	for _, m := range pvc.Spec.AccessModes {
		if m == corev1.ReadWriteMany {
			return ""
		}
	}
	return fmt.Sprintf("PersistentVolumeClaim %s cannot be shared by the job's pods: its access modes are %v, and pods on several nodes must all write to it; use a ReadWriteMany claim (a shared file system such as NFS or CephFS)", c.Claim, pvc.Spec.AccessModes)
}

// Env is what the program reads: the directory, and the run from JobSet's
// label on the pod.
func (c *Checkpoint) Env() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvCheckpointDir, Value: c.Dir},
		RunEnv(EnvRunAttempt),
	}
}
