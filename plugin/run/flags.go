// Package run is kubectl mpi run and rerun: it turns what a user asks for
// into TrainJobs, checks them against the cluster (runtime, implementation,
// queue quota), submits them and waits for them or follows their logs as
// asked. rerun is run's sibling rather than a package of its own: it takes
// a job from an existing one and run's flags as overrides, and shares run's
// options, checks and submission. The TrainJob itself is built by pkg/mpi,
// the package the operator uses.
package run

import (
	"errors"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// jobFlags are run's job flags as typed on the command line. rerun reads the
// same flags as overrides.
type jobFlags struct {
	Image          string
	Workers        int32
	SlotsPerWorker int32
	GPUs           int64
	GPUResource    string
	CPU            string
	Memory         string
	MPI            string
	Runtime        string
	Queue          string
	// Priority is a Kueue WorkloadPriorityClass; empty sets none.
	Priority string
	Network  string
	Topology string
	// SchedulingTimeout is a Go duration; empty sets none.
	SchedulingTimeout string
	// MaxRestarts is the restart budget, a count; empty leaves the
	// runtime's.
	MaxRestarts string
	// Checkpoint is CLAIM[:PATH]; empty sets none.
	Checkpoint string
	// TerminationGracePeriod is a Go duration; empty leaves the
	// runtime's.
	TerminationGracePeriod string
	// StallTimeout is a Go duration; empty leaves the runtime's.
	StallTimeout     string
	Env              []string
	Volumes          []string
	ImagePullSecrets []string
	ServiceAccount   string
	// Launch is how ranks are launched: api.RemoteLaunchAgent or
	// api.RemoteLaunchOpenSSH; empty leaves it to the runtime.
	Launch string
}

// Flag names, shared with the command that binds them.
const (
	flagImage          = "image"
	flagWorkers        = "workers"
	flagSlotsPerWorker = "slots-per-worker"
	flagGPUs           = "gpus"
	flagGPUResource    = "gpu-resource"
	flagCPU            = "cpu"
	flagMemory         = "memory"
	flagMPI            = "mpi"
	flagRuntime        = "runtime"
	flagQueue          = "queue"
	flagPriority       = "priority"
	flagNetwork        = "network"
	flagTopology       = "topology"
	flagSchedTimeout   = "scheduling-timeout"
	flagMaxRestarts    = "max-restarts"
	flagGracePeriod    = "termination-grace-period"
	flagStallTimeout   = "stall-timeout"
	flagCheckpoint     = "checkpoint-volume"
	flagEnv            = "env"
	flagVolume         = "volume"
	flagPullSecret     = "image-pull-secret"
	flagServiceAccount = "service-account"
	flagLaunch         = "launch"
)

// jobFlagNames lists the flags that shape a job (as opposed to how run
// behaves), for rerun's overrides and run -f's conflicts.
var jobFlagNames = []string{
	flagImage, flagWorkers, flagSlotsPerWorker, flagGPUs, flagGPUResource, flagCPU, flagMemory,
	flagMPI, flagRuntime, flagQueue, flagPriority, flagNetwork, flagTopology, flagSchedTimeout, flagMaxRestarts, flagCheckpoint, flagGracePeriod, flagStallTimeout, flagEnv, flagVolume,
	flagPullSecret, flagServiceAccount, flagLaunch,
}

// Spec reads the flags that were set (changed reports which) into a
// Spec; command is what follows --. Every problem is reported at once.
func (f *jobFlags) Spec(name, namespace string, command []string, changed func(flag string) bool) (Spec, error) {
	s := Spec{Name: name, Namespace: namespace, Image: f.Image, Command: command,
		Queue: f.Queue, Priority: f.Priority, NetworkProfile: f.Network, Topology: f.Topology, SchedulingTimeout: f.SchedulingTimeout,
		MaxRestarts: f.MaxRestarts, Checkpoint: f.Checkpoint, TerminationGracePeriod: f.TerminationGracePeriod, StallTimeout: f.StallTimeout,
		ImagePullSecrets: f.ImagePullSecrets, ServiceAccount: f.ServiceAccount, RemoteLaunch: f.Launch}
	var errs []error
	if changed(flagWorkers) {
		s.Workers = ptr.To(f.Workers)
	}
	if changed(flagSlotsPerWorker) {
		s.SlotsPerWorker = ptr.To(f.SlotsPerWorker)
	}
	if changed(flagGPUs) {
		s.GPUs = ptr.To(f.GPUs)
	}
	if f.GPUResource != "" {
		if !strings.Contains(f.GPUResource, "/") {
			errs = append(errs, fieldErr(flagGPUResource, "--gpu-resource=%q: name an extended resource such as nvidia.com/gpu or amd.com/gpu", f.GPUResource))
		}
		s.GPUResource = corev1.ResourceName(f.GPUResource)
	}
	for _, q := range []struct {
		flag, value string
		dst         **resource.Quantity
	}{{flagCPU, f.CPU, &s.CPU}, {flagMemory, f.Memory, &s.Memory}} {
		if !changed(q.flag) {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil {
			errs = append(errs, fieldErr(q.flag, "--%s=%q is not a quantity: write it as Kubernetes does, e.g. %s", q.flag, q.value, map[string]string{flagCPU: "500m or 4", flagMemory: "512Mi or 16Gi"}[q.flag]))
			continue
		}
		*q.dst = &v
	}
	if f.MPI != "" {
		impl, err := mpi.ParseImplementation(f.MPI)
		if err != nil {
			errs = append(errs, fieldErr(flagMPI, "--mpi: %w", err))
		}
		s.Implementation = impl
	}
	if f.Runtime != "" {
		kind, rtName, err := parseRuntime(f.Runtime)
		if err != nil {
			errs = append(errs, err)
		}
		s.Runtime, s.RuntimeKind = rtName, kind
	}
	for _, kv := range f.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			errs = append(errs, fieldErr(flagEnv, "--env %q: write it as NAME=VALUE", kv))
			continue
		}
		s.Env = append(s.Env, corev1.EnvVar{Name: k, Value: v})
	}
	for _, v := range f.Volumes {
		vol, err := parseVolume(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.Volumes = append(s.Volumes, vol)
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// parseRuntime reads --runtime: NAME (a ClusterTrainingRuntime) or
// KIND/NAME with KIND ClusterTrainingRuntime or TrainingRuntime (any case).
func parseRuntime(s string) (kind, name string, err error) {
	k, n, ok := strings.Cut(s, "/")
	if !ok {
		return trainer.ClusterTrainingRuntimeKind, s, nil
	}
	switch strings.ToLower(k) {
	case "clustertrainingruntime", "clustertrainingruntimes":
		return trainer.ClusterTrainingRuntimeKind, n, nil
	case "trainingruntime", "trainingruntimes":
		return trainer.TrainingRuntimeKind, n, nil
	}
	return "", "", fieldErr(flagRuntime, "--runtime %q: write NAME for a ClusterTrainingRuntime or TrainingRuntime/NAME for one in the job's namespace", s)
}

// parseVolume reads --volume pvc:CLAIM:/path[:ro].
func parseVolume(s string) (Volume, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "pvc" || parts[1] == "" || parts[2] == "" {
		return Volume{}, fieldErr(flagVolume, "--volume %q: write it as pvc:CLAIM:/mount/path (append :ro for read-only)", s)
	}
	v := Volume{Claim: parts[1], MountPath: parts[2]}
	if len(parts) == 4 {
		if parts[3] != "ro" && parts[3] != "rw" {
			return Volume{}, fieldErr(flagVolume, "--volume %q: the last part must be ro or rw", s)
		}
		v.ReadOnly = parts[3] == "ro"
	}
	return v, nil
}
