// Package children renders the objects an MPI TrainJob owns (its JobSet, its
// SSH Secret, its NetworkPolicy) from the job as resolved by pkg/mpi: pure
// functions of their inputs, apart from the reconciler that writes them.
package children

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/imagevolume"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// sshVolumeSize bounds the in-memory SSH directory; its files are a few KiB.
var sshVolumeSize = resource.MustParse("1Mi")

// OwnerReference makes a TrainJob the controller of an object.
func OwnerReference(tj *trainer.TrainJob) metav1.OwnerReference {
	return *metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))
}

// BuildOptions are the cluster-wide settings the JobSet depends on.
type BuildOptions struct {
	// ClusterDomain is the cluster's DNS domain (DefaultClusterDomain).
	ClusterDomain string
	// LaunchImage is Torus's image, holding mpi.LaunchImagePath: agent jobs'
	// pods take the launch agent from it (mpi.SSHSettings.Agent).
	LaunchImage string
	// LauncherAfterWorkers starts the launcher once the workers are Ready
	// (JobSet dependsOn), its SSH setup waiting for the hosts itself, even
	// with a LaunchImage: for nodes that run no containers (kwok), where
	// no launcher can wait for its workers.
	LauncherAfterWorkers bool
	// LaunchAgentDelivery is how torus-launch reaches the pods of agent
	// jobs whose image does not hold it and which choose nothing
	// themselves (api.AnnotationLaunchAgentDelivery); ""
	// is api.LaunchAgentByInitContainer.
	LaunchAgentDelivery string
	// Nodes lists the cluster's nodes, for api.LaunchAgentAuto: called
	// only for a job whose delivery it settles. Nil, or no node: auto
	// settles on the init container.
	Nodes func() []corev1.Node
	// SCCs: the cluster has OpenShift's SecurityContextConstraints, whose
	// admission decides which volumes a pod may have; auto settles on the
	// init container there.
	SCCs bool
	// KueueJobSets: Kueue admits MPI jobs through its JobSet integration, so
	// a queued TrainJob's JobSet carries the queue and starts suspended until
	// Kueue admits it. Otherwise Kueue's TrainJob integration, if any, works
	// on the TrainJob itself through spec.suspend and runtimePatches.
	KueueJobSets bool
	// StatusServer is where the job's pods report its progress
	// (trainerstatus): each pod gets the token, CA and environment a
	// program written for Kubeflow Trainer's status API reads. Nil: no
	// server is known, and the pods get none of it.
	StatusServer *trainerstatus.Server
}

// IstioInject is Istio's pod label that turns its sidecar injection on or
// off for a pod.
const IstioInject = "sidecar.istio.io/inject"

// kueuePodSetGroupForJobs groups the launcher's and the workers' pod sets
// for Kueue's topology-aware scheduling.
const kueuePodSetGroupForJobs = "mpi"

// Queued reports whether Kueue admits this TrainJob's JobSet.
func (o BuildOptions) Queued(tj *trainer.TrainJob) bool {
	return o.KueueJobSets && tj.Labels[mpi.KueueQueueLabel] != ""
}

// BuildJobSet renders the JobSet of an MPI TrainJob from its runtime's
// template: a launcher and a node replicated job sized and configured for
// the job, with the hostfile, SSH material and MPI environment wired in.
// It is a pure function of its inputs, opts.Nodes's answer among them.
func BuildJobSet(tj *trainer.TrainJob, rt *mpi.Runtime, job *mpi.Job, opts BuildOptions) (*jobsetv1alpha2.JobSet, error) {
	tmpl := rt.Spec.Template
	// The runtime's template as the job's runtimePatches change it, then
	// configured for the job: as upstream Trainer builds it.
	spec, err := patchTemplate(tmpl.Spec.DeepCopy(), tj.Spec.RuntimePatches)
	if err != nil {
		return nil, err
	}
	js := &jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            mpi.JobSetName(tj.Name),
			Namespace:       tj.Namespace,
			Labels:          maps.Clone(tmpl.Labels),
			Annotations:     maps.Clone(tmpl.Annotations),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(tj)},
		},
		Spec: *spec,
	}
	patchMetadata(js, tj.Spec.RuntimePatches)
	if js.Labels == nil {
		js.Labels = map[string]string{}
	}
	js.Labels[api.LabelJobName] = tj.Name

	var launcher, node *jobsetv1alpha2.ReplicatedJob
	for i := range js.Spec.ReplicatedJobs {
		switch rj := &js.Spec.ReplicatedJobs[i]; rj.Name {
		case mpi.LauncherJob:
			launcher = rj
		case mpi.NodeJob:
			node = rj
		}
	}
	if launcher == nil || node == nil {
		return nil, fmt.Errorf("%s %q must have replicated jobs %q and %q", rt.Kind, rt.Name, mpi.LauncherJob, mpi.NodeJob)
	}

	if opts.ClusterDomain == "" {
		opts.ClusterDomain = mpi.DefaultClusterDomain
	}
	if job.SSH.Agent && opts.LaunchImage == "" {
		return nil, fmt.Errorf("the job asks for Torus's launch agent (%s=%s), but the operator knows no image to deliver it from: start the operator with --launch-image, or set %s=%s",
			api.AnnotationRemoteLaunch, api.RemoteLaunchAgent, api.AnnotationRemoteLaunch, api.RemoteLaunchOpenSSH)
	}
	job = agentDelivered(job, opts, &launcher.Template.Spec.Template.Spec, &node.Template.Spec.Template.Spec)
	// With Torus's image at hand, the launcher starts with its workers and
	// waits, with the binary from it, until each accepts a connection that
	// proves it the job's (mpi.LaunchWaitCommand, mpi.LaunchWaitArgs);
	// without, it starts once they are Ready, as upstream's does.
	launcherWaits := opts.LaunchImage != "" && !opts.LauncherAfterWorkers
	b := podBuilder{tj: tj, job: job, clusterDomain: opts.ClusterDomain, launchImage: opts.LaunchImage, launcherWaits: launcherWaits, statusServer: opts.StatusServer}
	// The job's topology annotation, else its runtime's.
	for _, a := range []map[string]string{tj.Annotations, rt.Annotations} {
		if level, ok := a[api.AnnotationTopology]; ok {
			b.topology = level
			break
		}
	}
	if err := b.configure(launcher, api.RoleLauncher, 1); err != nil {
		return nil, err
	}
	if err := b.configure(node, api.RoleWorker, job.Workers); err != nil {
		return nil, err
	}
	switch {
	case launcherWaits:
		// A runtime written for upstream's controller starts its launcher
		// once the workers are Ready: the wait does better, in parallel.
		launcher.DependsOn = slices.DeleteFunc(launcher.DependsOn, func(d jobsetv1alpha2.DependsOn) bool { return d.Name == mpi.NodeJob })
		if len(launcher.DependsOn) == 0 {
			launcher.DependsOn = nil
		}
	case !dependsOnNodesReady(launcher):
		launcher.DependsOn = append(launcher.DependsOn, jobsetv1alpha2.DependsOn{Name: mpi.NodeJob, Status: jobsetv1alpha2.DependencyReady})
	}
	// JobSet starts replicated jobs in order and requires a job's
	// dependencies to come before it: the node job goes first.
	js.Spec.ReplicatedJobs = nodesFirst(js.Spec.ReplicatedJobs)

	if js.Spec.Network == nil {
		js.Spec.Network = &jobsetv1alpha2.Network{}
	}
	js.Spec.Network.EnableDNSHostnames = ptr.To(true)
	js.Spec.Network.Subdomain = mpi.Subdomain(tj.Name)
	// Workers must be resolvable before their readiness probe passes, or the
	// launcher's first ssh may race DNS.
	js.Spec.Network.PublishNotReadyAddresses = ptr.To(true)
	js.Spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{
		Operator:             jobsetv1alpha2.OperatorAll,
		TargetReplicatedJobs: []string{mpi.LauncherJob},
	}
	restartPolicy(js, job)
	js.Spec.Suspend = tj.Spec.Suspend
	if opts.Queued(tj) {
		// Kueue's JobSet integration: the queue travels with the JobSet,
		// which waits suspended until Kueue admits all of it at once.
		for _, l := range []string{mpi.KueueQueueLabel, mpi.KueuePriorityLabel} {
			if v := tj.Labels[l]; v != "" {
				js.Labels[l] = v
			}
		}
		js.Spec.Suspend = ptr.To(true)
		for i := range js.Spec.ReplicatedJobs {
			if rj := &js.Spec.ReplicatedJobs[i]; rj.Name == mpi.LauncherJob || rj.Name == mpi.NodeJob {
				gateOnKeys(&rj.Template.Spec.Template.Spec)
			}
		}
	}
	started, err := mpi.EncodeJob(job)
	if err != nil {
		return nil, err
	}
	if js.Annotations == nil {
		js.Annotations = map[string]string{}
	}
	js.Annotations[api.AnnotationJob] = started
	return js, nil
}

// agentDelivered is job with the way torus-launch reaches an agent job's
// pods settled, as the job's record keeps it: an image that holds the
// binary runs its own; otherwise the job's, its runtime's or the
// operator's choice (BuildOptions.LaunchAgentDelivery), auto settled by
// where the pods of specs may run. By image volume, the binary is the
// volume's, and the containers set themselves up with it as from an image
// that holds it.
func agentDelivered(job *mpi.Job, opts BuildOptions, specs ...*corev1.PodSpec) *mpi.Job {
	if !job.SSH.Agent {
		return job
	}
	j := *job
	switch {
	case j.SSH.AgentDelivery == api.LaunchAgentByImageVolume && j.SSH.AgentBinary == mpi.LaunchImageVolumeBinary:
		// Settled before: a started job's record.
		return &j
	case j.SSH.AgentBinary != "":
		j.SSH.AgentDelivery = ""
		return &j
	}
	delivery := cmp.Or(j.SSH.AgentDelivery, opts.LaunchAgentDelivery, api.LaunchAgentByInitContainer)
	if delivery == api.LaunchAgentAuto {
		delivery = api.LaunchAgentByInitContainer
		// Where SCCs decide a pod's volumes, the default ones refuse an
		// image volume.
		if !opts.SCCs && opts.Nodes != nil && imagevolume.MountedWherever(opts.Nodes(), specs...) {
			delivery = api.LaunchAgentByImageVolume
		}
	}
	j.SSH.AgentDelivery = delivery
	if delivery == api.LaunchAgentByImageVolume {
		j.SSH.AgentBinary = mpi.LaunchImageVolumeBinary
	}
	return &j
}

// gateOnKeys holds a pod until Torus has made its run's keys
// (api.SchedulingGateSSHKeys).
func gateOnKeys(pod *corev1.PodSpec) {
	for _, g := range pod.SchedulingGates {
		if g.Name == api.SchedulingGateSSHKeys {
			return
		}
	}
	pod.SchedulingGates = append(pod.SchedulingGates, corev1.PodSchedulingGate{Name: api.SchedulingGateSSHKeys})
}

// nodesFirst moves the node job before the launcher, keeping every other
// job's position.
func nodesFirst(jobs []jobsetv1alpha2.ReplicatedJob) []jobsetv1alpha2.ReplicatedJob {
	li, ni := -1, -1
	for i := range jobs {
		switch jobs[i].Name {
		case mpi.LauncherJob:
			li = i
		case mpi.NodeJob:
			ni = i
		}
	}
	if li < 0 || ni < 0 || ni < li {
		return jobs
	}
	node := jobs[ni]
	out := make([]jobsetv1alpha2.ReplicatedJob, 0, len(jobs))
	for i := range jobs {
		switch i {
		case li:
			out = append(out, node, jobs[li])
		case ni:
		default:
			out = append(out, jobs[i])
		}
	}
	return out
}

func dependsOnNodesReady(rj *jobsetv1alpha2.ReplicatedJob) bool {
	for _, d := range rj.DependsOn {
		if d.Name == mpi.NodeJob {
			return true
		}
	}
	return false
}

type podBuilder struct {
	tj            *trainer.TrainJob
	job           *mpi.Job
	clusterDomain string
	// topology is the node label whose domain all pods must share.
	topology string
	// launchImage delivers the launch agent (BuildOptions.LaunchImage).
	launchImage string
	// launcherWaits: the launcher starts with its workers and waits for
	// them from launchImage.
	launcherWaits bool
	// statusServer takes the job's progress (BuildOptions.StatusServer).
	statusServer *trainerstatus.Server
}

// configure sizes one replicated job and fills in its pod template.
func (b podBuilder) configure(rj *jobsetv1alpha2.ReplicatedJob, role string, pods int32) error {
	rj.Replicas = 1
	spec := &rj.Template.Spec
	spec.Parallelism = ptr.To(pods)
	spec.Completions = ptr.To(pods)
	// Indexed completion gives pods stable host names, which the hostfile uses.
	spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)

	pod := &spec.Template
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[api.LabelJobName] = b.tj.Name
	pod.Labels[api.LabelRole] = role
	if _, set := pod.Labels[IstioInject]; !set {
		// A service mesh's sidecar would sit between the ranks: it takes
		// sshd's port and MPI's dynamic ones for its own proxying and
		// mutual TLS, and the launcher's ssh and the ranks' connections
		// fail. A runtime that sets the label keeps its choice.
		pod.Labels[IstioInject] = "false"
	}
	if b.topology != "" {
		// Both pod sets in one group: launcher and workers share a domain.
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[mpi.KueueRequiredTopology] = b.topology
		pod.Annotations[mpi.KueuePodSetGroup] = kueuePodSetGroupForJobs
	}
	if role == api.RoleWorker {
		// MPI is all or nothing: a replaced worker cannot rejoin a running
		// MPI world, so a worker's failure fails its Job at once, and the
		// JobSet's failure policy restarts the whole world or fails it
		// (restartPolicy).
		spec.BackoffLimit = ptr.To[int32](0)
	}

	ps := &pod.Spec
	idx := -1
	for i := range ps.Containers {
		if ps.Containers[i].Name == mpi.TrainerContainer {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("replicated job %q has no container named %q", rj.Name, mpi.TrainerContainer)
	}
	ctr := &ps.Containers[idx]
	if ctr.TerminationMessagePolicy == "" {
		// The kubelet keeps the end of a failed container's output in its
		// status (at most 80 lines or 2 KiB), with no API call of ours: a
		// failure is explained in the program's own words after its pod's
		// logs are gone (diagnosis quotes them).
		ctr.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	}

	isLauncher := role == api.RoleLauncher
	runsRanks := !isLauncher || b.job.LauncherRunsRanks
	trainerJob := isLauncher || rj.Template.Labels[mpi.LabelAncestor] == mpi.AncestorTrainer
	if t := b.tj.Spec.Trainer; t != nil {
		// Every pod runs the same image: workers run sshd and the ranks
		// from it.
		if t.Image != nil {
			ctr.Image = *t.Image
		}
		if trainerJob && t.Command != nil {
			ctr.Command = t.Command
		}
		if trainerJob && t.Args != nil {
			ctr.Args = t.Args
		}
		// Unlike upstream (kubeflow/trainer#3427), env reaches workers too:
		// ranks run there.
		ctr.Env = mpi.UpsertEnv(ctr.Env, t.Env...)
		if runsRanks && t.ResourcesPerNode != nil {
			ctr.Resources = *t.ResourcesPerNode.DeepCopy()
		}
	}
	if isLauncher {
		ctr.Env = mpi.UpsertEnv(ctr.Env, mpi.LauncherEnv(b.job.Implementation, b.job.SlotsPerHost, b.job.SSH.Path, b.forwardedEnv())...)
		for _, e := range mpi.LauncherDefaults(b.job.Implementation) {
			if !slices.ContainsFunc(ctr.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name }) {
				ctr.Env = append(ctr.Env, e)
			}
		}
		// The hostfile alone, from the job's Secret: no key reaches the
		// MPI container this way.
		ps.Volumes = mpi.UpsertVolume(ps.Volumes, corev1.Volume{
			Name: mpi.HostfileVolume,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  mpi.SSHSecretName(b.tj.Name),
				Items:       []corev1.KeyToPath{{Key: mpi.HostfileKey, Path: mpi.HostfileKey}},
				DefaultMode: ptr.To[int32](0o444),
			}},
		})
		ctr.VolumeMounts = mpi.UpsertMount(ctr.VolumeMounts, corev1.VolumeMount{Name: mpi.HostfileVolume, MountPath: mpi.HostfileDir, ReadOnly: true})
	}

	worldLostExit := false
	if b.job.SSH.Agent {
		worldLostExit = b.addLaunchAgent(ps, ctr, role)
	} else {
		b.addSSH(ps, ctr, role)
	}
	failWhenDisrupted(spec, worldLostExit)
	if d := b.job.TerminationGracePeriod; d > 0 {
		// Every rank's time to checkpoint from SIGTERM, the launcher's
		// too: it forwards SIGTERM to mpirun.
		ps.TerminationGracePeriodSeconds = ptr.To(int64(d / time.Second))
	}
	if n := b.job.Network; n != nil {
		if runsRanks || n.AllPods {
			if err := n.Apply(pod, ctr); err != nil {
				return err
			}
		} else {
			// mpirun forwards the profile's variables to the ranks.
			ctr.Env = mpi.UpsertEnv(ctr.Env, n.Env...)
		}
	}
	if c := b.job.Checkpoint; c != nil {
		// The launcher too: a program that runs rank 0 there (or reads
		// its progress) finds the same place.
		c.Apply(ps, ctr)
	}
	if srv := b.statusServer; srv != nil {
		// Every pod: a rank reports with its own pod's token, and the
		// launcher forwards the environment to the ranks.
		srv.Apply(pod, ctr, b.tj.Namespace, b.tj.Name)
	}
	if b.job.Implementation.NeedsSearchDomain() {
		if ps.DNSConfig == nil {
			ps.DNSConfig = &corev1.PodDNSConfig{}
		}
		domain := mpi.SearchDomain(b.tj.Name, b.tj.Namespace, b.clusterDomain)
		if !slices.Contains(ps.DNSConfig.Searches, domain) {
			ps.DNSConfig.Searches = append(ps.DNSConfig.Searches, domain)
		}
	}
	return nil
}

// forwardedEnv names the variables the launcher passes on to every rank:
// the TrainJob's, the network profile's, the checkpoint's and the status
// server's.
func (b podBuilder) forwardedEnv() []string {
	var names []string
	if t := b.tj.Spec.Trainer; t != nil {
		for _, e := range t.Env {
			names = append(names, e.Name)
		}
	}
	if b.job.Network != nil {
		for _, e := range b.job.Network.Env {
			if !slices.Contains(names, e.Name) {
				names = append(names, e.Name)
			}
		}
	}
	if c := b.job.Checkpoint; c != nil {
		for _, e := range c.Env() {
			names = append(names, e.Name)
		}
	}
	if b.statusServer != nil {
		for _, n := range trainerstatus.EnvNames() {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// launchVolumeSize bounds the emptyDir holding the launch agent's binary.
var launchVolumeSize = resource.MustParse("64Mi")

// addLaunchAgent gives a pod Torus's remote launch in place of OpenSSH: an
// init container from Torus's image links the run's keys into the SSH
// directory and installs the agent's binary, or, where the job's image
// holds the binary or Torus's image is mounted as an image volume
// (SSHSettings.AgentBinary), the container does so itself; workers run
// the agent; the launcher waits for every worker's agent before its
// command; every container gets the client's settings. Nothing of the
// user's image is run but MPI and the program. It reports whether the
// container's exit code is torus-launch's, which says when the job's world
// lost a host (mpi.ExitWorldLost): a worker's agent, or a launcher whose
// command Torus wraps.
func (b podBuilder) addLaunchAgent(ps *corev1.PodSpec, ctr *corev1.Container, role string) (worldLostExit bool) {
	ps.Volumes = mpi.UpsertVolume(ps.Volumes,
		b.sshSecretVolume(role),
		sshDirVolume(),
		corev1.Volume{
			Name:         mpi.LaunchVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &launchVolumeSize}},
		},
	)
	mounts := ctr.VolumeMounts[:0:0]
	for _, m := range ctr.VolumeMounts {
		if m.Name != mpi.SSHVolume && m.Name != mpi.SSHSecretVolume && m.Name != mpi.LaunchVolume {
			mounts = append(mounts, m)
		}
	}
	ctr.Env = mpi.UpsertEnv(ctr.Env, mpi.LaunchEnv(b.job.Implementation, b.job.SSH)...)
	// A container whose image holds the binary sets itself up (the
	// worker's agent, a launcher's command Torus wraps): no init container.
	if b.job.SSH.AgentBinary != "" && (role == api.RoleWorker || len(ctr.Command) > 0) {
		ctr.VolumeMounts = append(mounts,
			// The whole volume: the setup makes the SSH directory in it.
			corev1.VolumeMount{Name: mpi.SSHVolume, MountPath: mpi.SSHVolumeMountPath},
			corev1.VolumeMount{Name: mpi.SSHSecretVolume, MountPath: mpi.SSHSecretMountPath, ReadOnly: true},
			corev1.VolumeMount{Name: mpi.LaunchVolume, MountPath: mpi.LaunchBinDir},
		)
		if b.job.SSH.AgentDelivery == api.LaunchAgentByImageVolume {
			ps.Volumes = mpi.UpsertVolume(ps.Volumes, corev1.Volume{
				Name: mpi.LaunchImageVolume,
				VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
					Reference: b.launchImage, PullPolicy: corev1.PullIfNotPresent,
				}},
			})
			ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: mpi.LaunchImageVolume, MountPath: mpi.LaunchImageMountPath, ReadOnly: true})
		}
		ctr.Env = mpi.UpsertEnv(ctr.Env, b.restartAttemptEnv())
		if role == api.RoleWorker {
			ctr.Command, ctr.Args = mpi.LaunchFromImageCommand(b.job.SSH, role, mpi.LaunchAgentCommand(b.job.SSH)), nil
		} else {
			b.launcherWaitsInContainer(ps, ctr)
			ctr.Command = mpi.LaunchFromImageCommand(b.job.SSH, role, ctr.Command)
		}
		return true
	}
	ctr.VolumeMounts = append(mounts,
		corev1.VolumeMount{Name: mpi.SSHVolume, MountPath: b.job.SSH.Path, SubPath: mpi.SSHDirSubPath},
		// What the SSH directory's links point to: the role's keys.
		corev1.VolumeMount{Name: mpi.SSHSecretVolume, MountPath: mpi.SSHSecretMountPath, ReadOnly: true},
		corev1.VolumeMount{Name: mpi.LaunchVolume, MountPath: mpi.LaunchBinDir, ReadOnly: true},
	)
	if b.job.SSH.AgentBinary != "" {
		// A launcher running its image's entrypoint, in a job whose
		// other containers set themselves up: the client's settings
		// name the volume's directory (SSHSettings.AgentDir).
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: mpi.SSHVolume, MountPath: mpi.SSHVolumeMountPath, ReadOnly: true})
	}
	initMounts := []corev1.VolumeMount{{Name: mpi.LaunchVolume, MountPath: mpi.LaunchBinDir}}
	setup := mpi.LaunchSetupArgs(b.job.SSH, role)
	switch {
	case role == api.RoleWorker:
		// A worker serves the launcher's remote commands; its ranks are
		// the agent's children.
		ctr.Command, ctr.Args = mpi.LaunchAgentCommand(b.job.SSH), nil
		worldLostExit = true
	case len(ctr.Command) > 0:
		b.launcherWaitsInContainer(ps, ctr)
		worldLostExit = true
	default:
		// The image's entrypoint runs, which Torus cannot wrap: the
		// setup waits before it ends.
		setup = mpi.LauncherSetupWaitArgs(b.job.SSH, b.callBack(role))
		ps.Volumes = mpi.UpsertVolume(ps.Volumes, podInfoVolume())
		initMounts = append(initMounts, podInfoMount())
	}
	setInitContainer(ps, b.torusInitContainer(mpi.SSHInitContainer, setup, ctr, initMounts...))
	return worldLostExit
}

// launcherWaitsInContainer has the launcher wait for its workers in its
// own container, then run its command in the wait's place; one that
// starts after them needs no mark of their readiness.
func (b podBuilder) launcherWaitsInContainer(ps *corev1.PodSpec, ctr *corev1.Container) {
	ctr.Command = mpi.LaunchWaitCommand(b.job.SSH, b.callBack(api.RoleLauncher), !b.launcherWaits, ctr.Command)
	if b.launcherWaits {
		ps.Volumes = mpi.UpsertVolume(ps.Volumes, podInfoVolume())
		ctr.VolumeMounts = mpi.UpsertMount(ctr.VolumeMounts, podInfoMount())
	}
}

// torusInitContainer is an init container running torus-launch from
// Torus's image with args, as ctr's user, with the job's Secret and the
// SSH volume mounted, and more.
func (b podBuilder) torusInitContainer(name string, args []string, ctr *corev1.Container, more ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           b.launchImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{mpi.LaunchImagePath},
		Args:            args,
		// A failed setup says why in the pod's status (diagnosis quotes it).
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Env:                      []corev1.EnvVar{b.restartAttemptEnv()},
		// Same user as the main container, so the files are its own.
		SecurityContext: ctr.SecurityContext.DeepCopy(),
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: mpi.SSHSecretVolume, MountPath: mpi.SSHSecretMountPath, ReadOnly: true},
			{Name: mpi.SSHVolume, MountPath: mpi.SSHVolumeMountPath},
		}, more...),
	}
}

// podInfoVolume is the launcher's downward API volume, through which its
// wait learns that Torus saw every worker Ready.
func podInfoVolume() corev1.Volume {
	return corev1.Volume{Name: mpi.PodInfoVolume, VolumeSource: mpi.PodInfoVolumeSource()}
}

func podInfoMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: mpi.PodInfoVolume, MountPath: mpi.PodInfoMountPath, ReadOnly: true}
}

// sshDirVolume is the in-memory emptyDir holding the pod's SSH directory.
func sshDirVolume() corev1.Volume {
	return corev1.Volume{
		Name: mpi.SSHVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium:    corev1.StorageMediumMemory,
			SizeLimit: &sshVolumeSize,
		}},
	}
}

// sshSecretVolume is the job's SSH Secret as a role's init container reads
// it.
func (b podBuilder) sshSecretVolume(role string) corev1.Volume {
	return corev1.Volume{
		Name: mpi.SSHSecretVolume,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: mpi.SSHSecretName(b.tj.Name),
			// No host key on the launcher.
			Items: mpi.SSHSecretItems(role),
			// Readable by whichever user the init container runs as
			// (a Secret volume's files are root's, or fsGroup's if the
			// pod sets one); only the init container mounts it, and
			// copies the files as the user's own, mode 0600.
			DefaultMode: ptr.To[int32](0o444),
		}},
	}
}

// callBack is the name Hydra's proxies on the workers connect back to
// mpiexec by: the launcher's, which its init container waits for.
func (b podBuilder) callBack(role string) string {
	if role == api.RoleLauncher && b.job.Implementation.NeedsSearchDomain() {
		return mpi.HostAddress(b.tj.Name, mpi.LauncherJob, 0)
	}
	return ""
}

// restartAttemptEnv hands the init container its pod's run.
func (b podBuilder) restartAttemptEnv() corev1.EnvVar { return mpi.RunEnv(mpi.EnvRestartAttempt) }

// setInitContainer puts Torus's init container first, replacing one of its
// name the runtime has.
func setInitContainer(ps *corev1.PodSpec, init corev1.Container) {
	for i := range ps.InitContainers {
		if ps.InitContainers[i].Name == init.Name {
			ps.InitContainers[i] = init
			return
		}
	}
	ps.InitContainers = append([]corev1.Container{init}, ps.InitContainers...)
}

// setLastInitContainer puts a Torus init container last, after the
// runtime's own, replacing one of its name.
func setLastInitContainer(ps *corev1.PodSpec, init corev1.Container) {
	ps.InitContainers = slices.DeleteFunc(ps.InitContainers, func(c corev1.Container) bool { return c.Name == init.Name })
	ps.InitContainers = append(ps.InitContainers, init)
}

// addSSH mounts the job's SSH directory and a user database that knows the
// pod's UID: both from an in-memory emptyDir that an init container fills
// as the pod's own user.
func (b podBuilder) addSSH(ps *corev1.PodSpec, ctr *corev1.Container, role string) {
	ps.Volumes = mpi.UpsertVolume(ps.Volumes,
		b.sshSecretVolume(role),
		sshDirVolume(),
	)
	// The SSH directory and the user database, as the init container
	// wrote them (SSHSetupScript).
	mounts := ctr.VolumeMounts[:0:0]
	for _, m := range ctr.VolumeMounts {
		if m.Name != mpi.SSHVolume {
			mounts = append(mounts, m)
		}
	}
	ctr.VolumeMounts = append(mounts,
		corev1.VolumeMount{Name: mpi.SSHVolume, MountPath: b.job.SSH.Path, SubPath: mpi.SSHDirSubPath},
		corev1.VolumeMount{Name: mpi.SSHVolume, MountPath: mpi.PasswdPath, SubPath: mpi.PasswdSubPath, ReadOnly: true},
	)

	init := corev1.Container{
		Name:            mpi.SSHInitContainer,
		Image:           ctr.Image,
		ImagePullPolicy: ctr.ImagePullPolicy,
		Command:         []string{"/bin/sh", "-c", mpi.SSHSetupScript(b.job.SSH.Path, b.job.SSH.Port, role, b.scriptWait(role))},
		// A failed setup says why in the pod's status (diagnosis quotes it).
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Env:                      []corev1.EnvVar{b.restartAttemptEnv()},
		// Same user as the main container, so the files are its own.
		SecurityContext: ctr.SecurityContext.DeepCopy(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: mpi.SSHSecretVolume, MountPath: mpi.SSHSecretMountPath, ReadOnly: true},
			{Name: mpi.SSHVolume, MountPath: mpi.SSHVolumeMountPath},
		},
	}
	setInitContainer(ps, init)
	if role == api.RoleLauncher && b.launcherWaits {
		ps.Volumes = mpi.UpsertVolume(ps.Volumes, podInfoVolume())
		setLastInitContainer(ps, b.torusInitContainer(mpi.WaitInitContainer, mpi.LaunchWaitArgs(b.job.SSH, b.callBack(role)), ctr, podInfoMount()))
	}
}

// scriptWait is the launcher's wait in SSHSetupScript: for a launcher that
// does not wait from Torus's image.
func (b podBuilder) scriptWait(role string) *mpi.HostsWait {
	if role != api.RoleLauncher || b.launcherWaits {
		return nil
	}
	return &mpi.HostsWait{CallBack: b.callBack(role)}
}
