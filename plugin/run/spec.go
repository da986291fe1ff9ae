package run

import (
	"errors"
	"path"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// defaultGPUResource is the extended resource a GPU count requests unless
// the user names another vendor's.
const defaultGPUResource corev1.ResourceName = "nvidia.com/gpu"

// Spec is an MPI job as `kubectl mpi run` asks for it. Zero values mean
// "not set": Apply leaves those parts of a TrainJob as they are, so one spec
// builds a new job (BuildTrainJob) and overrides a copied one (rerun).
type Spec struct {
	Name      string
	Namespace string

	// Runtime names the runtime; RuntimeKind is ClusterTrainingRuntimeKind
	// (the default) or TrainingRuntimeKind. BuildTrainJob picks
	// Implementation.RuntimeName() when Runtime is empty.
	Runtime     string
	RuntimeKind string
	// Implementation selects Open MPI 5 over 4 on the job itself
	// (api.AnnotationOpenMPIVersion); the other implementations are the
	// runtime's, chosen through Runtime.
	Implementation mpi.Implementation

	Image string
	// Command is the launcher's command line: the first word becomes the
	// container's command, the rest its arguments.
	Command []string

	// Workers is the number of MPI nodes (spec.trainer.numNodes).
	Workers *int32
	// SlotsPerWorker is the number of ranks per node (numProcPerNode).
	SlotsPerWorker *int32
	// GPUs per worker, of GPUResource (defaultGPUResource when empty).
	GPUs        *int64
	GPUResource corev1.ResourceName
	// CPU and Memory per worker, requested and limited alike so that ranks
	// get what they were promised.
	CPU    *resource.Quantity
	Memory *resource.Quantity

	// Env reaches the launcher and every worker; entries replace those of
	// the same name. It is the TrainJob's spec.trainer.env: the MPI
	// container's environment is the job's, which runtime patches may not
	// set (upstream Trainer refuses them too).
	Env []corev1.EnvVar

	// Volumes, ImagePullSecrets and ServiceAccount reach the launcher's and
	// every worker's pods through the job's runtime patch (patchManager),
	// on the runtime as it is.
	Volumes          []Volume
	ImagePullSecrets []string
	ServiceAccount   string

	// Queue is the Kueue LocalQueue.
	Queue string
	// Priority is the Kueue WorkloadPriorityClass.
	Priority string
	// NetworkProfile names an MPINetworkProfile.
	NetworkProfile string
	// Topology names the node label whose domain all pods must share.
	Topology string
	// SchedulingTimeout is how long the job may wait for all its ranks to
	// run (a Go duration; api.AnnotationSchedulingTimeout).
	SchedulingTimeout string
	// MaxRestarts is how many times the program's failure may start the
	// whole job again (api.AnnotationMaxRestarts).
	MaxRestarts string
	// Checkpoint is CLAIM[:PATH], the claim every rank keeps its
	// checkpoints on (api.AnnotationCheckpointVolume).
	Checkpoint string
	// TerminationGracePeriod is how long every rank has from SIGTERM to
	// exit (a Go duration; api.AnnotationTerminationGracePeriod).
	TerminationGracePeriod string
	// StallTimeout is how long the running job's launcher may print
	// nothing before the job fails (a Go duration;
	// api.AnnotationStallTimeout).
	StallTimeout string
	// RemoteLaunch chooses Torus's launch agent or the image's OpenSSH
	// (api.AnnotationRemoteLaunch); empty leaves it to the runtime.
	RemoteLaunch string

	Labels      map[string]string
	Annotations map[string]string
}

// BuildTrainJob builds the TrainJob of a run.
func BuildTrainJob(s Spec) *trainer.TrainJob {
	if s.Runtime == "" {
		s.Runtime = s.Implementation.RuntimeName()
	}
	tj := mpi.NewTrainJob(s.Name, s.Namespace)
	s.Apply(tj)
	return tj
}

// Apply writes every field the spec sets onto tj; Name and Namespace are
// the caller's to set.
func (s Spec) Apply(tj *trainer.TrainJob) {
	if s.Runtime != "" {
		kind := s.RuntimeKind
		if kind == "" {
			kind = trainer.ClusterTrainingRuntimeKind
		}
		tj.Spec.RuntimeRef = trainer.RuntimeRef{
			Name:     s.Runtime,
			APIGroup: ptr.To(trainer.GroupVersion.Group),
			Kind:     ptr.To(kind),
		}
	}
	if key, value := s.Implementation.VersionSelector(); key != "" {
		// The default needs no annotation, but one already on the job (a
		// rerun of an Open MPI 5 job) must be undone; otherwise the
		// runtime's version stands.
		if _, set := tj.Annotations[key]; set || !s.Implementation.IsTrainerDefault() {
			setString(&tj.Annotations, key, value)
		}
	}
	for k, v := range s.Labels {
		setString(&tj.Labels, k, v)
	}
	for k, v := range s.Annotations {
		setString(&tj.Annotations, k, v)
	}
	if s.Priority != "" {
		setString(&tj.Labels, mpi.KueuePriorityLabel, s.Priority)
	}
	if s.Queue != "" {
		setString(&tj.Labels, mpi.KueueQueueLabel, s.Queue)
	}
	if s.NetworkProfile != "" {
		setString(&tj.Annotations, api.AnnotationNetworkProfile, s.NetworkProfile)
	}
	if s.Topology != "" {
		setString(&tj.Annotations, api.AnnotationTopology, s.Topology)
	}
	if s.SchedulingTimeout != "" {
		setString(&tj.Annotations, api.AnnotationSchedulingTimeout, s.SchedulingTimeout)
	}
	if s.MaxRestarts != "" {
		setString(&tj.Annotations, api.AnnotationMaxRestarts, s.MaxRestarts)
	}
	if s.Checkpoint != "" {
		setString(&tj.Annotations, api.AnnotationCheckpointVolume, s.Checkpoint)
	}
	if s.TerminationGracePeriod != "" {
		setString(&tj.Annotations, api.AnnotationTerminationGracePeriod, s.TerminationGracePeriod)
	}
	if s.StallTimeout != "" {
		setString(&tj.Annotations, api.AnnotationStallTimeout, s.StallTimeout)
	}
	if s.RemoteLaunch != "" {
		setString(&tj.Annotations, api.AnnotationRemoteLaunch, s.RemoteLaunch)
	}

	t := tj.Spec.Trainer
	if t == nil {
		t = &trainer.Trainer{}
	}
	if s.Image != "" {
		t.Image = ptr.To(s.Image)
	}
	if len(s.Command) > 0 {
		t.Command = []string{s.Command[0]}
		t.Args = nil
		if len(s.Command) > 1 {
			t.Args = append([]string(nil), s.Command[1:]...)
		}
	}
	if s.Workers != nil {
		t.NumNodes = ptr.To(*s.Workers)
	}
	if s.SlotsPerWorker != nil {
		t.NumProcPerNode = ptr.To(*s.SlotsPerWorker)
	}
	for _, e := range s.Env {
		t.Env = mpi.UpsertEnv(t.Env, e)
	}
	s.applyResources(t)
	s.applyPodPatch(tj)
	if t.Image != nil || len(t.Command) > 0 || len(t.Args) > 0 || len(t.Env) > 0 || t.NumNodes != nil ||
		t.NumProcPerNode != nil || t.ResourcesPerNode != nil {
		tj.Spec.Trainer = t
	}
}

func (s Spec) applyResources(t *trainer.Trainer) {
	if s.CPU == nil && s.Memory == nil && s.GPUs == nil {
		return
	}
	res := t.ResourcesPerNode
	if res == nil {
		res = &corev1.ResourceRequirements{}
	}
	set := func(name corev1.ResourceName, q *resource.Quantity) {
		if q == nil {
			return
		}
		if q.IsZero() {
			delete(res.Requests, name)
			delete(res.Limits, name)
			return
		}
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		if res.Limits == nil {
			res.Limits = corev1.ResourceList{}
		}
		res.Requests[name] = q.DeepCopy()
		res.Limits[name] = q.DeepCopy()
	}
	set(corev1.ResourceCPU, s.CPU)
	set(corev1.ResourceMemory, s.Memory)
	if s.GPUs != nil {
		gpu := s.GPUResource
		if gpu == "" {
			gpu = defaultGPUResource
		}
		set(gpu, resource.NewQuantity(*s.GPUs, resource.DecimalSI))
	}
	if len(res.Requests) == 0 {
		res.Requests = nil
	}
	if len(res.Limits) == 0 {
		res.Limits = nil
	}
	if res.Requests == nil && res.Limits == nil && res.Claims == nil {
		res = nil
	}
	t.ResourcesPerNode = res
}

// Validate reports every problem of the spec at once, in the words of the
// run command's flags, before anything reaches the API server.
func (s Spec) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) { errs = append(errs, fieldErr(field, format, args...)) }

	if s.Name != "" {
		workers := int32(1)
		if s.Workers != nil {
			workers = *s.Workers
		}
		for _, p := range mpi.TrainJobNameProblems(s.Name, workers) {
			add("name", "job name %q %s", s.Name, p)
		}
	}
	if s.Workers != nil && *s.Workers < 1 {
		add(flagWorkers, "--workers=%d: a job needs at least 1 worker", *s.Workers)
	}
	if s.SlotsPerWorker != nil && *s.SlotsPerWorker < 1 {
		add(flagSlotsPerWorker, "--slots-per-worker=%d: each worker runs at least 1 rank", *s.SlotsPerWorker)
	}
	if s.GPUs != nil && *s.GPUs < 0 {
		add(flagGPUs, "--gpus=%d: the GPU count cannot be negative", *s.GPUs)
	}
	if s.CPU != nil && s.CPU.Sign() < 0 {
		add(flagCPU, "--cpu=%s: the CPU request cannot be negative", s.CPU)
	}
	if s.Memory != nil && s.Memory.Sign() < 0 {
		add(flagMemory, "--memory=%s: the memory request cannot be negative", s.Memory)
	}
	if len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "" {
		add("command", "the command after -- starts with an empty word")
	}
	seen := map[string]bool{}
	for _, e := range s.Env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			add(flagEnv, "--env %s: %s", e.Name, msg)
		}
		if mpi.ReservedEnvNames.Has(e.Name) {
			add(flagEnv, "--env %s: Torus sets %s from the job's hostfile and SSH settings; remove it", e.Name, e.Name)
		}
		if seen[e.Name] {
			add(flagEnv, "--env %s is given twice", e.Name)
		}
		seen[e.Name] = true
	}
	// The SSH directory is the runtime's: check tells once it is read.
	if err := validateVolumes(s.Volumes, ""); err != nil {
		errs = append(errs, err)
	}
	seen = map[string]bool{}
	for _, name := range s.ImagePullSecrets {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			add(flagPullSecret, "--image-pull-secret %q is not a Secret name: %s", name, msg)
		}
		if strings.HasSuffix(name, mpi.SSHSecretName("")) {
			add(flagPullSecret, "--image-pull-secret %q: Secrets named *%s hold MPI jobs' SSH keys, which only their own pods receive; name your registry's Secret", name, mpi.SSHSecretName(""))
		}
		if seen[name] {
			add(flagPullSecret, "--image-pull-secret %s is given twice", name)
		}
		seen[name] = true
	}
	if s.ServiceAccount != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.ServiceAccount) {
			add(flagServiceAccount, "--service-account %q is not a ServiceAccount name: %s", s.ServiceAccount, msg)
		}
	}
	if s.Priority != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.Priority) {
			add(flagPriority, "--priority %q: name a WorkloadPriorityClass (kubectl get workloadpriorityclasses): %s", s.Priority, msg)
		}
	}
	if s.Queue != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.Queue) {
			add(flagQueue, "--queue %q: %s", s.Queue, msg)
		}
	}
	if s.NetworkProfile != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.NetworkProfile) {
			add(flagNetwork, "--network %q: %s", s.NetworkProfile, msg)
		}
	}
	if s.RemoteLaunch != "" && s.RemoteLaunch != api.RemoteLaunchAgent && s.RemoteLaunch != api.RemoteLaunchOpenSSH {
		add(flagLaunch, "--launch %q: use %s (Torus's launch agent: the image needs MPI and no OpenSSH) or %s (the image's sshd and ssh)",
			s.RemoteLaunch, api.RemoteLaunchAgent, api.RemoteLaunchOpenSSH)
	}
	if s.Topology != "" {
		for _, msg := range validation.IsQualifiedName(s.Topology) {
			add(flagTopology, "--topology %q must be a node label such as cloud.provider.com/topology-rack: %s", s.Topology, msg)
		}
	}
	if s.SchedulingTimeout != "" {
		if d, err := time.ParseDuration(s.SchedulingTimeout); err != nil || d <= 0 {
			add(flagSchedTimeout, "--scheduling-timeout %q must be a positive duration such as 10m or 90s", s.SchedulingTimeout)
		}
	}
	if s.MaxRestarts != "" {
		if _, err := mpi.ParseMaxRestarts(s.MaxRestarts); err != nil {
			add(flagMaxRestarts, "--max-restarts %q: %v", s.MaxRestarts, err)
		}
	}
	if s.Checkpoint != "" {
		if _, err := mpi.ParseCheckpoint(s.Checkpoint, mpi.DefaultSSHPath); err != nil {
			add(flagCheckpoint, "--checkpoint-volume %q: give CLAIM or CLAIM:/path, a ReadWriteMany PersistentVolumeClaim of the job's namespace and where to mount it (default %s): %s",
				s.Checkpoint, mpi.DefaultCheckpointDir, mpi.CheckpointProblems(err))
		}
	}
	if s.TerminationGracePeriod != "" {
		if _, err := mpi.ParseTerminationGracePeriod(s.TerminationGracePeriod); err != nil {
			add(flagGracePeriod, "--termination-grace-period %q: %v", s.TerminationGracePeriod, err)
		}
	}
	if s.StallTimeout != "" {
		if _, err := mpi.ParseStallTimeout(s.StallTimeout); err != nil {
			add(flagStallTimeout, "--stall-timeout %q: %v", s.StallTimeout, err)
		}
	}
	if s.Runtime != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.Runtime) {
			add(flagRuntime, "--runtime %q: %s", s.Runtime, msg)
		}
	}
	return errors.Join(errs...)
}

// Volume is a PersistentVolumeClaim mounted into the launcher and every
// worker.
type Volume struct {
	Claim     string
	MountPath string
	ReadOnly  bool
}

// String is the volume as --volume takes it.
func (v Volume) String() string {
	s := "pvc:" + v.Claim + ":" + v.MountPath
	if v.ReadOnly {
		s += ":ro"
	}
	return s
}

// Name is the pod volume's name.
func (v Volume) Name() string {
	name := "pvc-" + v.Claim
	if len(name) > validation.DNS1123LabelMaxLength {
		name = strings.TrimRight(name[:validation.DNS1123LabelMaxLength], "-.")
	}
	return strings.ReplaceAll(name, ".", "-")
}

// validateVolumes checks claims and mount paths: valid names, absolute
// distinct paths, none over the files Torus mounts.
func validateVolumes(vols []Volume, sshPath string) error {
	var errs []error
	paths := map[string]bool{}
	for _, v := range vols {
		for _, msg := range validation.IsDNS1123Subdomain(v.Claim) {
			errs = append(errs, fieldErr(flagVolume, "--volume pvc:%s: claim name: %s", v.Claim, msg))
		}
		clean := path.Clean(v.MountPath)
		switch {
		case !path.IsAbs(v.MountPath):
			errs = append(errs, fieldErr(flagVolume, "--volume pvc:%s:%s: the mount path must be absolute", v.Claim, v.MountPath))
		case clean == mpi.HostfileDir || strings.HasPrefix(mpi.HostfileDir, clean+"/") || clean == "/":
			errs = append(errs, fieldErr(flagVolume, "--volume pvc:%s:%s would hide the job's hostfile in %s: choose another path", v.Claim, v.MountPath, mpi.HostfileDir))
		case sshPath != "" && (clean == sshPath || strings.HasPrefix(sshPath, clean+"/")):
			errs = append(errs, fieldErr(flagVolume, "--volume pvc:%s:%s would hide the job's SSH directory %s: choose another path", v.Claim, v.MountPath, sshPath))
		case paths[clean]:
			errs = append(errs, fieldErr(flagVolume, "--volume ...:%s: two volumes are mounted at the same path", v.MountPath))
		}
		paths[clean] = true
	}
	return errors.Join(errs...)
}

func setString(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}
