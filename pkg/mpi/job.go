package mpi

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
)

// Runtime is the resolved TrainingRuntime or ClusterTrainingRuntime a
// TrainJob refers to.
type Runtime struct {
	Kind        string
	Name        string
	Annotations map[string]string
	Spec        trainer.TrainingRuntimeSpec
}

// IsMPI reports whether the runtime has an MPI policy.
func (r *Runtime) IsMPI() bool {
	return r.Spec.MLPolicy != nil && r.Spec.MLPolicy.MPI != nil
}

// SSHPath is the SSH directory of an MPI runtime's pods
// (mlPolicy.mpi.sshAuthMountPath, DefaultSSHPath unless set).
func (r *Runtime) SSHPath() string {
	if !r.IsMPI() {
		return DefaultSSHPath
	}
	return ptr.Deref(r.Spec.MLPolicy.MPI.SSHAuthMountPath, DefaultSSHPath)
}

// Job is what Torus needs to know about an MPI TrainJob once its runtime is
// merged in: the TrainJob's own values win over the runtime's.
type Job struct {
	Name           string
	Namespace      string
	Implementation Implementation
	// NumNodes is the number of MPI nodes the user asked for.
	NumNodes int32
	// Workers is the number of pods of the node replicated job.
	Workers int32
	// SlotsPerHost is the number of ranks on each host.
	SlotsPerHost int32
	// LauncherRunsRanks is runLauncherAsNode: the launcher is also a host.
	LauncherRunsRanks bool
	SSH               SSHSettings
	// SchedulingTimeout bounds the wait for all ranks to run; zero waits
	// for ever (api.AnnotationSchedulingTimeout).
	SchedulingTimeout time.Duration
	// Network is the job's resolved MPINetworkProfile, if it selects one.
	Network *NetworkPlan
	// MaxRestarts is how many times the program's failure may start the
	// whole world again (api.AnnotationMaxRestarts, else the runtime's
	// failurePolicy.maxRestarts).
	MaxRestarts int32 `json:",omitempty"`
	// Checkpoint is where the job's ranks keep their checkpoints, if it
	// names a claim (api.AnnotationCheckpointVolume).
	Checkpoint *Checkpoint `json:",omitempty"`
	// TerminationGracePeriod is how long every rank has from SIGTERM to
	// exit (api.AnnotationTerminationGracePeriod); zero leaves the pods'
	// own.
	TerminationGracePeriod time.Duration `json:",omitempty"`
	// StallTimeout is how long the running job's launcher may print
	// nothing before the job fails (api.AnnotationStallTimeout); zero
	// waits for ever.
	StallTimeout time.Duration `json:",omitempty"`
}

// ResolveJob merges a TrainJob with its MPI runtime.
func ResolveJob(tj *trainer.TrainJob, rt *Runtime) (*Job, error) {
	if !rt.IsMPI() {
		return nil, fmt.Errorf("%s %q has no mlPolicy.mpi", rt.Kind, rt.Name)
	}
	policy := rt.Spec.MLPolicy
	mpiPolicy := policy.MPI
	impl, err := ResolveImplementation(ptr.Deref(mpiPolicy.MPIImplementation, ""), tj.Annotations, rt.Annotations)
	if err != nil {
		return nil, err
	}
	job := &Job{
		Name:              tj.Name,
		Namespace:         tj.Namespace,
		Implementation:    impl,
		NumNodes:          ptr.Deref(policy.NumNodes, 1),
		SlotsPerHost:      ptr.Deref(mpiPolicy.NumProcPerNode, 1),
		LauncherRunsRanks: ptr.Deref(mpiPolicy.RunLauncherAsNode, false),
		SSH:               SSHSettings{Path: rt.SSHPath(), Port: DefaultSSHPort, StrictModes: true},
	}
	if t := tj.Spec.Trainer; t != nil && t.NumNodes != nil {
		job.NumNodes = *t.NumNodes
	}
	if t := tj.Spec.Trainer; t != nil && t.NumProcPerNode != nil {
		job.SlotsPerHost = *t.NumProcPerNode
	} else if job.SlotsPerHost == 1 {
		// As upstream Trainer: a runtime's single slot becomes one slot per
		// GPU when the nodes have several.
		if gpus := gpusPerNode(tj, rt); gpus > 1 {
			job.SlotsPerHost = int32(gpus)
		}
	}
	if err := checkBounds(job); err != nil {
		return nil, err
	}
	if err := CheckSSHPath(job.SSH.Path); err != nil {
		return nil, err
	}
	job.Workers = job.NumNodes
	if job.LauncherRunsRanks {
		job.Workers = max(job.NumNodes-1, 1)
	}
	if v, ok := firstAnnotation(api.AnnotationSSHPort, tj.Annotations, rt.Annotations); ok {
		p, err := parseSSHPort(v)
		if err != nil {
			return nil, err
		}
		job.SSH.Port = p
	}
	if v, ok := firstAnnotation(api.AnnotationSSHKeyAlgorithm, tj.Annotations, rt.Annotations); ok {
		alg, err := ParseKeyAlgorithm(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", api.AnnotationSSHKeyAlgorithm, err)
		}
		job.SSH.KeyAlgorithm = alg
	}
	if v, ok := firstAnnotation(api.AnnotationRemoteLaunch, tj.Annotations, rt.Annotations); ok {
		agent, err := parseRemoteLaunch(v)
		if err != nil {
			return nil, err
		}
		job.SSH.Agent = agent
	}
	// The runtime speaks for its own image only: a job that sets another
	// needs the annotation itself.
	ownImage := tj.Spec.Trainer != nil && tj.Spec.Trainer.Image != nil && *tj.Spec.Trainer.Image != ""
	if v, ok := tj.Annotations[api.AnnotationLaunchAgentPath]; ok {
		job.SSH.AgentBinary, err = parseLaunchAgentPath(v)
	} else if v, ok := rt.Annotations[api.AnnotationLaunchAgentPath]; ok && !ownImage {
		job.SSH.AgentBinary, err = parseLaunchAgentPath(v)
	}
	if err != nil {
		return nil, err
	}
	if v, ok := firstAnnotation(api.AnnotationLaunchAgentDelivery, tj.Annotations, rt.Annotations); ok {
		if job.SSH.AgentDelivery, err = parseLaunchAgentDelivery(v); err != nil {
			return nil, err
		}
	}
	if v, ok := firstAnnotation(api.AnnotationSchedulingTimeout, tj.Annotations, rt.Annotations); ok {
		d, err := parseSchedulingTimeout(v)
		if err != nil {
			return nil, err
		}
		job.SchedulingTimeout = d
	}
	if fp := rt.Spec.Template.Spec.FailurePolicy; fp != nil {
		job.MaxRestarts = fp.MaxRestarts
	}
	if v, ok := firstAnnotation(api.AnnotationTerminationGracePeriod, tj.Annotations, rt.Annotations); ok {
		if job.TerminationGracePeriod, err = parseAnnotation(api.AnnotationTerminationGracePeriod, v, ParseTerminationGracePeriod); err != nil {
			return nil, err
		}
	}
	if v, ok := firstAnnotation(api.AnnotationStallTimeout, tj.Annotations, rt.Annotations); ok {
		if job.StallTimeout, err = parseAnnotation(api.AnnotationStallTimeout, v, ParseStallTimeout); err != nil {
			return nil, err
		}
	}
	if v, ok := tj.Annotations[api.AnnotationMaxRestarts]; ok {
		if job.MaxRestarts, err = parseAnnotation(api.AnnotationMaxRestarts, v, ParseMaxRestarts); err != nil {
			return nil, err
		}
	}
	if v, ok := tj.Annotations[api.AnnotationCheckpointVolume]; ok {
		if job.Checkpoint, err = ParseCheckpoint(v, job.SSH.Path); err != nil {
			return nil, err
		}
	}
	if job.MaxRestarts < 0 || job.MaxRestarts > MaxRestarts {
		return nil, fmt.Errorf("%s %q: failurePolicy.maxRestarts is %d: set it from 0 to %d", rt.Kind, rt.Name, job.MaxRestarts, MaxRestarts)
	}
	return job, nil
}

// sshPathPattern is what an SSH directory path may hold.
var sshPathPattern = regexp.MustCompile(`^/[A-Za-z0-9._/-]+$`)

// CheckSSHPath refuses an SSH directory (mlPolicy.mpi.sshAuthMountPath)
// that could not be written as it is into the init script and into ssh's
// and sshd's configuration files.
func CheckSSHPath(p string) error {
	if !sshPathPattern.MatchString(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("mlPolicy.mpi.sshAuthMountPath %q: set it to a clean absolute directory path of letters, digits, '.', '_', '-' and '/', such as %s", p, DefaultSSHPath)
	}
	return nil
}

// Placement lays out the job's ranks on its hosts.
func (j *Job) Placement() Placement {
	return NewPlacement(j.Name, j.Workers, j.SlotsPerHost, j.LauncherRunsRanks)
}

// Hostfile renders the job's hostfile.
func (j *Job) Hostfile() string { return Hostfile(j.Implementation, j.Placement()) }

func firstAnnotation(key string, sources ...map[string]string) (string, bool) {
	for _, s := range sources {
		if v, ok := s[key]; ok {
			return v, true
		}
	}
	return "", false
}

// GPUsPerNode is what each of a job's nodes asks of GPUs: the count, and
// the extended resources (nvidia.com/gpu, ...) it asks them of.
func GPUsPerNode(tj *trainer.TrainJob, rt *Runtime) (int64, []corev1.ResourceName) {
	limits := nodeLimits(tj, rt)
	var names []corev1.ResourceName
	for name := range limits {
		if IsGPU(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return GPUs(limits), names
}

// GPUWarnings says what a job's GPUs cannot do for its ranks: more ranks on
// a worker than it has GPUs works only for a program that shares GPUs on
// purpose.
func GPUWarnings(job *Job, gpus int64, resources []corev1.ResourceName) []string {
	if gpus == 0 || int64(job.SlotsPerHost) <= gpus {
		return nil
	}
	names := make([]string, len(resources))
	for i, r := range resources {
		names[i] = string(r)
	}
	return []string{fmt.Sprintf("each worker runs %d ranks on %d GPUs (%s): NCCL refuses two ranks of one communicator on one GPU (\"Duplicate GPU detected\"), "+
		"and ranks that choose their GPU by local rank find none past the %s; give each rank a GPU (numProcPerNode %d: kubectl mpi run --slots-per-worker %d) unless the program shares GPUs on purpose",
		job.SlotsPerHost, gpus, strings.Join(names, ", "), ordinal(gpus), gpus, gpus)}
}

// ordinal is 1st, 2nd, 3rd, ...
func ordinal(n int64) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// gpusPerNode reads the GPU limit per node from the TrainJob's
// resourcesPerNode, or else from the runtime's node container.
func gpusPerNode(tj *trainer.TrainJob, rt *Runtime) int64 {
	return GPUs(nodeLimits(tj, rt))
}

// nodeLimits are the limits of a job's node container: the TrainJob's
// resourcesPerNode, or else the runtime's.
func nodeLimits(tj *trainer.TrainJob, rt *Runtime) corev1.ResourceList {
	var res *corev1.ResourceRequirements
	if t := tj.Spec.Trainer; t != nil && t.ResourcesPerNode != nil {
		res = t.ResourcesPerNode
	} else {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
			if rj.Name != NodeJob {
				continue
			}
			for c := range rj.Template.Spec.Template.Spec.Containers {
				if ctr := &rj.Template.Spec.Template.Spec.Containers[c]; ctr.Name == TrainerContainer {
					res = &ctr.Resources
				}
			}
		}
	}
	if res == nil {
		return nil
	}
	return res.Limits
}

// GPUs counts GPUs in a resource list: any extended resource named
// <vendor>/gpu.
func GPUs(rl corev1.ResourceList) int64 {
	var n int64
	for name, q := range rl {
		if IsGPU(name) {
			n += q.Value()
		}
	}
	return n
}

// IsGPU reports whether a resource is a GPU: an extended resource named
// <vendor>/gpu (nvidia.com/gpu, amd.com/gpu).
func IsGPU(name corev1.ResourceName) bool {
	return strings.HasSuffix(string(name), "/gpu")
}

// EnvNCCLSocketIfName names the interfaces NCCL may use.
const EnvNCCLSocketIfName = "NCCL_SOCKET_IFNAME"

// MaxJobRecord bounds a job's record (api.AnnotationJob): a few hundred
// bytes, and a few KiB with a network profile's attachments and variables.
// The operator's cache keeps no longer record, so no JobSet anyone writes
// makes it hold more.
const MaxJobRecord = 32 << 10

// EncodeJob is a job as api.AnnotationJob records it.
func EncodeJob(j *Job) (string, error) {
	data, err := json.Marshal(j)
	if err != nil {
		return "", fmt.Errorf("encoding job %s: %w", j.Name, err)
	}
	if len(data) > MaxJobRecord {
		return "", fmt.Errorf("job %s resolves to a record of %d KiB, over Torus's bound of %d KiB: its network profile %s sets too many variables; shorten the profile's env", j.Name, len(data)>>10, MaxJobRecord>>10, j.profileName())
	}
	return string(data), nil
}

func (j *Job) profileName() string {
	if j.Network == nil {
		return "(none)"
	}
	return j.Network.Profile
}

// DecodeJob reads a job api.AnnotationJob recorded; false when there is none or
// it cannot be read (a JobSet made by an older operator).
func DecodeJob(s string) (*Job, bool) {
	if s == "" {
		return nil, false
	}
	var j Job
	if err := json.Unmarshal([]byte(s), &j); err != nil || j.Workers < 1 || j.SlotsPerHost < 1 {
		return nil, false
	}
	return &j, true
}
