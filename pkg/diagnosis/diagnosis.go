// Package diagnosis explains why an MPI job's pods failed, in words a person
// can act on: which rank range, which pod, what happened and what to change.
// The operator writes its findings into TrainJob status; the plugin's
// describe shows them.
package diagnosis

import (
	"fmt"
	"iter"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// Finding is one pod's problem.
type Finding struct {
	Pod    string `json:"pod,omitempty"` // "" when the pod was never created
	Host   string `json:"host"`          // "launcher" or "worker-<i>"
	Ranks  string `json:"ranks,omitempty"`
	Reason string `json:"reason"` // OOMKilled, Error, Evicted, ImagePullBackOff, ...
	// Detail says what happened; Fix what to change.
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
	// Output is the end of a failed container's own output, as the
	// kubelet kept it: escaped, bounded, without key material.
	Output []string `json:"output,omitempty"`
	// Terminal is true when the pod will not recover by itself.
	Terminal bool `json:"terminal"`
	at       time.Time
}

// At is when the finding's pod showed it: its container's end, its
// condition's transition.
func (f Finding) At() time.Time { return f.at }

// Message renders the finding as one line.
func (f Finding) Message() string {
	who := f.Host
	if f.Ranks != "" {
		who += " (" + f.Ranks + ")"
	}
	msg := fmt.Sprintf("%s %s: %s", who, f.Reason, f.Detail)
	if len(f.Output) > 0 {
		msg += "; it printed: " + f.Quote()
	}
	if f.Fix != "" {
		msg += "; " + f.Fix
	}
	if f.Pod == "" {
		return msg
	}
	return msg + " [pod " + f.Pod + "]"
}

// Quote renders the finding's output lines, each in quotes.
func (f Finding) Quote() string { return quoteAll(f.Output) }

// quoteAll renders output lines, each in quotes.
func quoteAll(lines []string) string {
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = `"` + l + `"`
	}
	return strings.Join(q, " ")
}

// Pods inspects a job's pods and returns their problems, the most likely
// root cause first: terminal failures before transient ones, earliest first,
// since in MPI one rank's death makes the others fail after it.
func Pods(pods []corev1.Pod, placement mpi.Placement) []Finding {
	var out []Finding
	job := &jobFacts{pods: pods, slots: placement.SlotsPerHost}
	for i := range pods {
		if f, ok := pod(&pods[i], placement, job); ok {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Terminal != out[j].Terminal {
			return out[i].Terminal
		}
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.Before(out[j].at)
		}
		return out[i].Pod < out[j].Pod
	})
	return out
}

// HostOf names the MPI host a pod is and its ranks.
func HostOf(p *corev1.Pod, placement mpi.Placement) (host, ranks string) {
	h := hostOf(p)
	if _, _, ok := placement.Ranks(h.Role, h.Index); ok {
		return h.Name(), placement.RankRange(h.Role, h.Index)
	}
	return h.Name(), ""
}

// hostOf is the MPI host a pod is, by its role and Job completion index.
func hostOf(p *corev1.Pod) mpi.Host {
	idx, _ := strconv.Atoi(p.Labels["batch.kubernetes.io/job-completion-index"])
	return mpi.Host{Role: p.Labels[api.LabelRole], Index: int32(idx)}
}

// containerStatuses yields a pod's init containers' statuses, then its
// containers'.
func containerStatuses(p *corev1.Pod) iter.Seq[*corev1.ContainerStatus] {
	return func(yield func(*corev1.ContainerStatus) bool) {
		for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for i := range list {
				if !yield(&list[i]) {
					return
				}
			}
		}
	}
}

// workerSSHD is what a job's workers' pods say of their sshd: the port the
// kubelet probes it on (a launcher starts only once every worker passed
// that probe), and when the first of them stopped, if one did.
type workerSSHD struct {
	port      string
	firstStop time.Time
}

// workersSSHD reads the workers' probed sshd port, when they all probe
// the same one, and the earliest end of a worker's container.
func workersSSHD(pods []corev1.Pod) workerSSHD {
	var w workerSSHD
	for i := range pods {
		p := &pods[i]
		if p.Labels[api.LabelRole] != api.RoleWorker {
			continue
		}
		c := findContainer(p, mpi.TrainerContainer)
		if c == nil {
			return workerSSHD{}
		}
		port := probedPort(c)
		if port == "" || (w.port != "" && w.port != port) {
			return workerSSHD{}
		}
		w.port = port
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == c.Name && t != nil && (w.firstStop.IsZero() || t.FinishedAt.Time.Before(w.firstStop)) {
				w.firstStop = t.FinishedAt.Time
			}
		}
	}
	return w
}

// jobFacts is what a finding's fix names of the job's pods as a whole.
// Only a container's failure reads them: they are taken from the pods on
// first use, which spares a job whose pods are all well (a reconcile of a
// large starting job) a second pass over every pod.
type jobFacts struct {
	pods []corev1.Pod
	// slots is the job's ranks per worker.
	slots int32

	read bool
	sshd workerSSHD
	// gpus is each worker's GPUs, of the extended resource gpuResource.
	gpus        int64
	gpuResource string
}

// load reads the facts of the job's pods, once.
func (j *jobFacts) load() {
	if j.read {
		return
	}
	j.read = true
	j.sshd = workersSSHD(j.pods)
	j.gpus, j.gpuResource = workerGPUs(j.pods)
}

// workerGPUs is what a worker's rank container asks of GPUs: the count and
// the extended resource (nvidia.com/gpu, amd.com/gpu, ...).
func workerGPUs(pods []corev1.Pod) (int64, string) {
	for i := range pods {
		if pods[i].Labels[api.LabelRole] != api.RoleWorker {
			continue
		}
		c := findContainer(&pods[i], mpi.TrainerContainer)
		if c == nil {
			continue
		}
		var names []string
		for name := range c.Resources.Limits {
			if mpi.IsGPU(name) {
				names = append(names, string(name))
			}
		}
		slices.Sort(names)
		return mpi.GPUs(c.Resources.Limits), strings.Join(names, ", ")
	}
	return 0, ""
}

// probedPort is the TCP port a container's startup or readiness probe
// checks, or "".
func probedPort(c *corev1.Container) string {
	for _, pr := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe} {
		if pr == nil || pr.TCPSocket == nil {
			continue
		}
		if pr.TCPSocket.Port.Type == intstr.Int {
			return strconv.Itoa(int(pr.TCPSocket.Port.IntVal))
		}
		for _, cp := range c.Ports {
			if cp.Name == pr.TCPSocket.Port.StrVal {
				return strconv.Itoa(int(cp.ContainerPort))
			}
		}
	}
	return ""
}

// pod is a pod's problem, if it has one. A healthy pod, the most of a
// large job's, costs no allocation: the operator diagnoses every pod of a
// job on each of its pods' changes.
func pod(p *corev1.Pod, placement mpi.Placement, job *jobFacts) (Finding, bool) {
	f, ok := problem(p, job)
	if ok {
		f.Pod = p.Name
		f.Host, f.Ranks = HostOf(p, placement)
	}
	return f, ok
}

// HasProblem reports whether the pod, on its own, has a problem a finding
// would name (Pods): what a job's status can say in words of one pod. A
// healthy pod costs no allocation.
func HasProblem(p *corev1.Pod) bool {
	_, ok := problem(p, &jobFacts{})
	return ok
}

// problem is pod's finding but for the pod and host it names.
func problem(p *corev1.Pod, job *jobFacts) (Finding, bool) {
	var f Finding
	if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" {
		f.Reason, f.Terminal = "Evicted", true
		f.Detail = p.Status.Message
		f.Fix = "the node ran short of a resource: request what the job needs (--cpu, --memory) so the scheduler places it where it fits"
		f.at = podTime(p)
		return f, true
	}
	if c := disrupted(p); c != nil {
		f.Reason, f.Terminal = c.Reason, true
		f.Detail = disruptionDetail(c)
		f.Fix = restartsFree(p)
		f.at = c.LastTransitionTime.Time
		return f, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			// The scheduler's own words say what no node has.
			f.Reason, f.Detail = c.Reason, "the scheduler says: "+c.Message
			f.Fix = "ask for what one node can give (--cpu, --memory, --gpus per worker), or add nodes that have it"
			f.at = c.LastTransitionTime.Time
			return f, true
		}
	}
	for cs := range containerStatuses(p) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			// Under restartPolicy OnFailure or Always the kubelet starts
			// the container again: a moment of a crash loop, not the end.
			f.Terminal = p.Status.Phase == corev1.PodFailed || p.Spec.RestartPolicy == corev1.RestartPolicyNever
			f.at = t.FinishedAt.Time
			if t.Reason == "OOMKilled" {
				f.Reason = "OOMKilled"
				f.Detail = "memory limit " + memoryLimit(p, cs.Name) + " exceeded"
				f.Fix = "raise --memory (spec.trainer.resourcesPerNode limits)"
			} else {
				f.Reason = "Error"
				f.Detail = fmt.Sprintf("container %s exited with code %d%s", cs.Name, t.ExitCode, signal(t.ExitCode))
				f.Fix = "see kubectl mpi logs " + p.Labels[api.LabelJobName] + logsFlag(hostOf(p).Name())
				var classified bool
				if t.Reason == "StartError" || t.Reason == "ContainerCannotRun" {
					// The runtime's words: what could not be run.
					f.Reason = t.Reason
					f.Detail = fmt.Sprintf("container %s could not start: %s", cs.Name, startError(t.Message))
				} else {
					// The program's own words, where the kubelet kept them
					// (terminationMessagePolicy FallbackToLogsOnError).
					ctx := contextOf(p)
					ctx.logs = "kubectl mpi logs " + p.Labels[api.LabelJobName] + logsFlag(hostOf(p).Name())
					job.load()
					ctx.slots, ctx.gpus, ctx.gpuResource = job.slots, job.gpus, job.gpuResource
					// Every worker passed its probe of that port before the
					// launcher started, and none had stopped when it failed.
					if w := job.sshd; w.firstStop.IsZero() || !w.firstStop.Before(t.FinishedAt.Time) {
						ctx.servingPort = w.port
					}
					out := readOutput(t.Message, ctx)
					f.Output = out.quote
					if classified = out.reason != ""; classified {
						f.Reason = out.reason
						f.Detail += ": " + out.detail
						f.Fix = out.fix
					}
				}
				if t.ExitCode == mpi.ExitWorldLost && cs.Name == mpi.TrainerContainer && contextOf(p).agent {
					worldLost(&f, p)
				}
				if !f.Terminal {
					f.Detail += " and is restarted by the kubelet" + restarts(cs.RestartCount)
				}
				if cs.Name == mpi.SSHInitContainer && !classified {
					f.Fix = "the SSH setup failed: the image needs " + strings.Join(mpi.SSHSetupTools, ", ") +
						" (see kubectl logs " + p.Name + " -c " + mpi.SSHInitContainer + ")"
				}
			}
			return f, true
		}
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff":
				f.Reason, f.Detail = w.Reason, pullFailure(p, cs.Name, w.Message)
				f.Fix = "check the image name and tag, that the node reaches its registry, and the pull secret for private registries; or load the image onto the nodes"
			case "InvalidImageName":
				f.Reason, f.Detail = w.Reason, fmt.Sprintf("cannot pull image %q: %s", imageOf(p, cs.Name), w.Message)
				f.Fix = "check the image name and tag"
				f.Terminal = true
			case "ErrImageNeverPull":
				f.Reason, f.Detail = w.Reason, fmt.Sprintf("image %q is not on the node and its pull policy is Never", imageOf(p, cs.Name))
				f.Fix = "load the image onto the nodes, or set imagePullPolicy IfNotPresent in the runtime"
			case "CrashLoopBackOff":
				f.Reason, f.Detail = w.Reason, "container "+cs.Name+" keeps exiting"+restarts(cs.RestartCount)
				f.Fix = "see kubectl mpi logs " + p.Labels[api.LabelJobName] + logsFlag(hostOf(p).Name()) + " --previous"
			case "CreateContainerConfigError", "CreateContainerError":
				f.Reason, f.Detail = w.Reason, w.Message
				f.Fix = "check the Secrets, ConfigMaps and volumes the pod refers to"
			default:
				continue
			}
			f.at = podTime(p)
			return f, true
		}
	}
	return Finding{}, false
}

// disrupted is the pod's DisruptionTarget condition, if something other
// than its program stopped it.
func disrupted(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// disruptionDetail says who stopped a pod, by the reasons Kubernetes gives
// DisruptionTarget, and in its own words.
func disruptionDetail(c *corev1.PodCondition) string {
	var who string
	switch c.Reason {
	case "PreemptionByScheduler":
		who = "the scheduler preempted it for a pod of higher priority"
	case "DeletionByTaintManager":
		who = "its node became unavailable, and the node's taint deleted it"
	case "EvictionByEvictionAPI":
		who = "it was evicted (a node drain, or another use of the Eviction API)"
	case "DeletionByPodGC":
		who = "its node is gone, and the pod garbage collector deleted it"
	case "TerminationByKubelet":
		who = "the node's kubelet stopped it (a node shutdown or a resource running short)"
	default:
		who = "it was disrupted"
	}
	if c.Message != "" {
		who += " (" + bounded(c.Message) + ")"
	}
	return who
}

// restartsFree says what follows a pod's loss to something other than its
// program, where the job's pod failure policy tells it from the program's
// failure: the Job API allows one only for pods never restarted in place.
func restartsFree(p *corev1.Pod) string {
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return ""
	}
	return "not the program's failure: the job restarts without counting against its restart budget, and a program that keeps checkpoints (--checkpoint-volume) resumes from its last one"
}

// worldLost explains torus-launch's exit code for a world that lost a host
// to something other than the program: a worker's agent stopped while it
// ran the job's commands, or a launcher whose command failed after that
// (its own last line names the host) or that was stopped itself.
func worldLost(f *Finding, p *corev1.Pod) {
	f.Fix = restartsFree(p)
	if p.Labels[api.LabelRole] == api.RoleWorker {
		f.Reason = "Stopped"
		f.Detail = fmt.Sprintf("its pod was stopped while it ran the job's ranks (exit %d)", mpi.ExitWorldLost)
		return
	}
	f.Reason = "WorldLost"
	f.Detail = fmt.Sprintf("the job lost a host to something other than the program (exit %d)", mpi.ExitWorldLost)
}

// contextOf is what a fix names of a pod's job: its name, and where its
// pods find the job's sshd configuration.
func contextOf(p *corev1.Pod) failureContext {
	c := failureContext{job: p.Labels[api.LabelJobName], namespace: p.Namespace, sshdConfig: mpi.SSHDConfigPath("<sshAuthMountPath>")}
	if ctr := findContainer(p, mpi.TrainerContainer); ctr != nil {
		for _, m := range ctr.VolumeMounts {
			if m.Name == mpi.SSHVolume && m.SubPath == mpi.SSHDirSubPath {
				c.sshdConfig = mpi.SSHDConfigPath(m.MountPath)
			}
			c.agent = c.agent || m.Name == mpi.LaunchVolume
		}
		for _, e := range ctr.Env {
			if e.Name == mpi.EnvNCCLSocketIfName {
				c.socketIfName = e.Value
			}
		}
	}
	for _, a := range mpi.PodAttachments(p) {
		// "net1 192.168.1.7 (mpi-networks/ib)": the interface comes first.
		if name, _, _ := strings.Cut(a, " "); name != "unreadable" {
			c.interfaces = append(c.interfaces, name)
		}
	}
	return c
}

// startError keeps what runc says it could not do, without the layers of
// the container runtime that passed it on ("failed to create containerd
// task: failed to create shim task: OCI runtime create failed: ...").
func startError(msg string) string {
	const runc = "unable to start container process: "
	if i := strings.LastIndex(msg, runc); i >= 0 {
		msg = msg[i+len(runc):]
	}
	return strings.TrimSuffix(strings.TrimSpace(msg), ": unknown")
}

// restarts says how often the kubelet restarted a container, if it did.
func restarts(n int32) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " (restarted once)"
	}
	return fmt.Sprintf(" (restarted %d times)", n)
}

func logsFlag(host string) string {
	if host == api.RoleLauncher {
		return " --launcher"
	}
	return " --worker " + host[len(api.RoleWorker)+1:]
}

func signal(code int32) string {
	switch code {
	case 137:
		return " (SIGKILL)"
	case 139:
		return " (SIGSEGV)"
	case 143:
		return " (SIGTERM)"
	}
	return ""
}

func podTime(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget || c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

func findContainer(p *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// pullFailure says what a failed pull means for the pod: unless its
// policy pulls every time, the kubelet pulls only an image the node does
// not have, so the image is not there.
func pullFailure(p *corev1.Pod, name, msg string) string {
	image := imageOf(p, name)
	if c := findContainer(p, name); c != nil && c.ImagePullPolicy == corev1.PullAlways {
		return fmt.Sprintf("cannot pull image %q: %s", image, msg)
	}
	node := "the node"
	if p.Spec.NodeName != "" {
		node = "node " + p.Spec.NodeName
	}
	return fmt.Sprintf("image %q is not on %s, and pulling it failed: %s", image, node, msg)
}

func imageOf(p *corev1.Pod, name string) string {
	if c := findContainer(p, name); c != nil {
		return c.Image
	}
	return ""
}

func memoryLimit(p *corev1.Pod, name string) string {
	if c := findContainer(p, name); c != nil {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			return q.String()
		}
	}
	return "(none set: the node's memory)"
}
