package controller

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// Settings are the operator's settings for the jobs it runs, declared once:
// the operator binds them to its flags (AddFlags), the controllers read
// them, and the builders of a job's children take theirs from them
// (buildOptions). A zero field takes its default.
type Settings struct {
	// ClusterDomain is the cluster's DNS domain, for Hydra's search path.
	ClusterDomain string
	// LaunchImage is the image agent jobs take Torus's launch agent from
	// (children.BuildOptions.LaunchImage).
	LaunchImage string
	// LauncherAfterWorkers: children.BuildOptions.LauncherAfterWorkers.
	LauncherAfterWorkers bool
	// LaunchAgentDelivery: children.BuildOptions.LaunchAgentDelivery.
	LaunchAgentDelivery string
	// KueueTrainJobIntegration is true when Kueue's native TrainJob
	// integration admits TrainJobs (through spec.suspend and
	// runtimePatches). By default Kueue admits MPI jobs through its JobSet
	// integration, which takes Intel MPI and MPICH jobs as well.
	KueueTrainJobIntegration bool
	// MaxConcurrentReconciles is the number of TrainJobs reconciled at once.
	MaxConcurrentReconciles int
	// JobSetReportTimeout is how long a JobSet may go without its
	// controller's first status before its TrainJob reports
	// Created=Unknown; zero means DefaultJobSetReportTimeout.
	JobSetReportTimeout time.Duration
	// MaxNodes is the largest numNodes a job may have (zero:
	// mpi.DefaultMaxNodes); larger jobs get Created=False.
	MaxNodes int32
	// SSHKeyAlgorithm is the type of jobs' SSH keys where neither a job
	// nor its runtime chooses one (zero: mpi.DefaultKeyAlgorithm).
	SSHKeyAlgorithm mpi.KeyAlgorithm
	// IgnorePodCreationFailures leaves out the watch on the Job
	// controller's FailedCreate events (pods a quota, LimitRange or Pod
	// Security refused): jobs then wait without saying why.
	IgnorePodCreationFailures bool
}

// AddFlags binds the settings to the operator's flags, with their defaults.
func (s *Settings) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.ClusterDomain, "cluster-domain", mpi.DefaultClusterDomain, "The cluster's DNS domain.")
	fs.IntVar(&s.MaxConcurrentReconciles, "max-concurrent-reconciles", DefaultMaxConcurrentReconciles, "TrainJobs reconciled in parallel.")
	s.MaxNodes = mpi.DefaultMaxNodes
	fs.Var((*maxNodesFlag)(&s.MaxNodes), "max-nodes", fmt.Sprintf(
		"The largest numNodes of a job the webhook admits and the controller runs (at most %d; a job's hostfile must fit in its Secret).", mpi.AbsoluteMaxNodes))
	fs.DurationVar(&s.JobSetReportTimeout, "jobset-report-timeout", DefaultJobSetReportTimeout,
		"How long a JobSet may go without its controller's first status, while the controller reports on no other JobSet, before the TrainJob reports Created=Unknown (JobSetNotReported).")
	s.SSHKeyAlgorithm = mpi.DefaultKeyAlgorithm
	fs.Var((*keyAlgorithmFlag)(&s.SSHKeyAlgorithm), "ssh-key-algorithm", fmt.Sprintf(
		"Type of the SSH keys of jobs that choose none (annotation %s): ed25519, ecdsa-p256, ecdsa-p384 or rsa-3072; OpenSSH in FIPS mode needs one of the last three.", api.AnnotationSSHKeyAlgorithm))
	fs.Var((*negatedFlag)(&s.IgnorePodCreationFailures), "watch-pod-creation-failures",
		"Watch the Job controller's FailedCreate events, so that a job whose pods a ResourceQuota, LimitRange, Pod Security or an SCC refused says so (one watch, filtered by the API server).")
	fs.Lookup("watch-pod-creation-failures").NoOptDefVal = "true"
	fs.BoolVar(&s.KueueTrainJobIntegration, "kueue-trainjob-integration", false,
		"Kueue admits TrainJobs through its native TrainJob integration (spec.suspend, runtimePatches) rather than through "+
			"its JobSet integration; the JobSet path is the default because it admits Intel MPI and MPICH jobs too.")
	fs.StringVar(&s.LaunchImage, "launch-image", "",
		"Image holding "+mpi.LaunchImagePath+", from which jobs using Torus's launch agent (annotation "+api.AnnotationRemoteLaunch+"="+api.RemoteLaunchAgent+") take it (default: the operator's own image, read from its pod).")
	fs.BoolVar(&s.LauncherAfterWorkers, "launcher-after-workers", false,
		"Start each launcher once its workers are Ready (JobSet dependsOn) rather than with them: for nodes that run no containers, such as kwok's, where no launcher can wait for its workers.")
	fs.StringVar(&s.LaunchAgentDelivery, "launch-agent-delivery", api.LaunchAgentAuto,
		"How "+mpi.LaunchBinary+" reaches the pods of agent jobs whose image does not hold it (annotation "+api.AnnotationLaunchAgentDelivery+" chooses per runtime or job): "+
			api.LaunchAgentByInitContainer+" (an init container copies it from --launch-image; any node), "+
			api.LaunchAgentByImageVolume+" (--launch-image mounted as an image volume, so pods start with no init container; every node's runtime must mount image volumes: Kubernetes 1.35 or later with containerd 2.1 or CRI-O 1.31 or later) or "+
			api.LaunchAgentAuto+" (the image volume where every node a job's pods may run on mounts one and the cluster has no OpenShift SCCs, the init container elsewhere; settled when the job's JobSet is made).")
}

// Validate refuses settings no job could run under, naming the flag.
func (s Settings) Validate() error {
	if s.MaxNodes < 0 || s.MaxNodes > mpi.AbsoluteMaxNodes {
		return fmt.Errorf("--max-nodes=%d: set it between 1 and %d", s.MaxNodes, mpi.AbsoluteMaxNodes)
	}
	if _, err := mpi.ParseKeyAlgorithm(string(s.SSHKeyAlgorithm)); s.SSHKeyAlgorithm != "" && err != nil {
		return fmt.Errorf("--ssh-key-algorithm: %w", err)
	}
	switch s.LaunchAgentDelivery {
	case "", api.LaunchAgentByInitContainer, api.LaunchAgentByImageVolume, api.LaunchAgentAuto:
	default:
		return fmt.Errorf("--launch-agent-delivery=%q: set it to %s, %s or %s", s.LaunchAgentDelivery, api.LaunchAgentByInitContainer, api.LaunchAgentByImageVolume, api.LaunchAgentAuto)
	}
	if s.MaxConcurrentReconciles < 0 {
		return fmt.Errorf("--max-concurrent-reconciles=%d: set it to 1 or more", s.MaxConcurrentReconciles)
	}
	return nil
}

// withDefaults fills the zero fields with their defaults.
func (s Settings) withDefaults() Settings {
	if s.ClusterDomain == "" {
		s.ClusterDomain = mpi.DefaultClusterDomain
	}
	if s.MaxConcurrentReconciles == 0 {
		s.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if s.JobSetReportTimeout == 0 {
		s.JobSetReportTimeout = DefaultJobSetReportTimeout
	}
	if s.MaxNodes == 0 {
		s.MaxNodes = mpi.DefaultMaxNodes
	}
	return s
}

// buildOptions are the settings a job's children are built with.
func (s Settings) buildOptions() children.BuildOptions {
	return children.BuildOptions{ClusterDomain: s.ClusterDomain, LaunchImage: s.LaunchImage, LauncherAfterWorkers: s.LauncherAfterWorkers,
		LaunchAgentDelivery: s.LaunchAgentDelivery, KueueJobSets: !s.KueueTrainJobIntegration}
}

// keyAlgorithmFlag is --ssh-key-algorithm: a bad value is refused as the
// flags are parsed.
type keyAlgorithmFlag mpi.KeyAlgorithm

func (f *keyAlgorithmFlag) String() string { return string(*f) }
func (f *keyAlgorithmFlag) Type() string   { return "string" }
func (f *keyAlgorithmFlag) Set(v string) error {
	a, err := mpi.ParseKeyAlgorithm(v)
	if err != nil {
		return err
	}
	*f = keyAlgorithmFlag(a)
	return nil
}

// maxNodesFlag is --max-nodes: a value out of range is refused as the
// flags are parsed.
type maxNodesFlag int32

func (f *maxNodesFlag) String() string { return strconv.Itoa(int(*f)) }
func (f *maxNodesFlag) Type() string   { return "int32" }
func (f *maxNodesFlag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || n > int64(mpi.AbsoluteMaxNodes) {
		return fmt.Errorf("set it between 1 and %d", mpi.AbsoluteMaxNodes)
	}
	*f = maxNodesFlag(n)
	return nil
}

// negatedFlag is a boolean flag bound to a field that says the opposite,
// so that the field's zero value is the flag's default.
type negatedFlag bool

func (f *negatedFlag) String() string { return strconv.FormatBool(!bool(*f)) }
func (f *negatedFlag) Type() string   { return "bool" }
func (f *negatedFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*f = negatedFlag(!b)
	return nil
}
