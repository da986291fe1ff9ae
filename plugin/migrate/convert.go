package migrate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// RuntimeMode says where a converted job's launcher and worker templates go.
type RuntimeMode string

const (
	// RuntimeModeReuse refers the TrainJob to the ClusterTrainingRuntime
	// Torus ships for the job's MPI implementation when that runtime and the
	// TrainJob's own fields express the MPIJob; otherwise it generates one.
	RuntimeModeReuse RuntimeMode = "reuse"
	// RuntimeModeGenerate always generates a TrainingRuntime named after
	// the job, holding its templates.
	RuntimeModeGenerate RuntimeMode = "generate"
)

// RuntimeModes lists the modes in the order users see them.
var RuntimeModes = []RuntimeMode{RuntimeModeReuse, RuntimeModeGenerate}

// Options tune a conversion.
type Options struct {
	// RuntimeMode defaults to RuntimeModeReuse.
	RuntimeMode RuntimeMode
}

// Result is what one MPIJob became.
type Result struct {
	TrainJob *trainer.TrainJob
	// Runtime is the generated TrainingRuntime, nil when the TrainJob uses
	// a shipped ClusterTrainingRuntime.
	Runtime  *trainer.TrainingRuntime
	Findings []Finding
}

// Err joins the result's error findings; nil when the job converted.
func (r *Result) Err() error { return findingsError(r.Findings) }

const (
	// labelFramework marks runtimes by framework, as the shipped ones are.
	labelFramework = "trainer.kubeflow.org/framework"
	// envJobRole is the variable mpi-operator sets to launcher or worker.
	envJobRole = "K_MPI_JOB_ROLE"
	// volcanoQueueAnnotation is where Volcano reads a job's queue.
	volcanoQueueAnnotation = "scheduling.volcano.sh/queue-name"
	// mpiOperatorLauncherBackoff is Kubernetes' default backoffLimit, which
	// mpi-operator's launcher Job had when runPolicy.backoffLimit was unset.
	mpiOperatorLauncherBackoff = 6
)

// nvidiaEnv are the variables mpi-operator empties on a launcher that runs
// no ranks, so that it does not use the node's GPUs.
var nvidiaEnv = []string{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}

// gangSchedulers are scheduler names whose gangs mpi-operator fed with a
// PodGroup, which a converted job no longer gets.
var gangSchedulers = map[string]bool{"volcano": true, "scheduler-plugins-scheduler": true}

// convertJob turns one MPIJob into a TrainJob and, when needed, a
// TrainingRuntime. The input is not modified.
func convertJob(in *kubeflow.MPIJob, opts Options) *Result {
	if opts.RuntimeMode == "" {
		opts.RuntimeMode = RuntimeModeReuse
	}
	c := &converter{in: in.DeepCopy(), opts: opts}
	c.convert()
	res := &Result{Findings: c.r.findings}
	if !c.r.failed() {
		res.TrainJob, res.Runtime = c.tj, c.rt
	}
	return res
}

type converter struct {
	in   *kubeflow.MPIJob
	opts Options
	r    reporter

	impl         mpi.Implementation
	slots        int32
	workers      int32
	numNodes     int32
	launcherRuns bool
	sshPath      string

	// launcher and worker are the converted pod templates: what
	// mpi-operator would have run, in Torus's shape.
	launcher, worker corev1.PodTemplateSpec
	// workerRunsSSHD: the worker's command is an sshd the converter
	// understood and pointed at Torus's configuration.
	workerRunsSSHD bool

	labels, annotations map[string]string
	ttl                 *int32
	launcherBackoff     *int32

	tj *trainer.TrainJob
	rt *trainer.TrainingRuntime
}

var (
	pathSpec      = newPath("spec")
	pathRunPolicy = pathSpec.Child("runPolicy")
	pathReplicas  = pathSpec.Child("mpiReplicaSpecs")
	pathMetadata  = newPath("metadata")
)

func replicaPath(rt kubeflow.MPIReplicaType) fieldPath { return pathReplicas.Key(string(rt)) }

func podSpecPath(rt kubeflow.MPIReplicaType) fieldPath {
	return replicaPath(rt).Child("template", "spec")
}

func mainContainerPath(rt kubeflow.MPIReplicaType) fieldPath {
	return podSpecPath(rt).Child("containers").Index(0)
}

func (c *converter) convert() {
	c.checkJob()
	if c.r.failed() {
		return
	}
	c.launcher = c.convertTemplate(kubeflow.MPIReplicaTypeLauncher)
	c.worker = c.convertTemplate(kubeflow.MPIReplicaTypeWorker)
	c.convertMetadata()
	c.convertScheduling()
	tjSpec := c.convertRunPolicy()
	if c.r.failed() {
		return
	}

	var reuse *trainer.ClusterTrainingRuntime
	if c.opts.RuntimeMode == RuntimeModeReuse {
		reuse = c.chooseShipped()
	}
	c.tj = &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        c.in.Name,
			Namespace:   c.in.Namespace,
			Labels:      emptyToNil(c.labels),
			Annotations: emptyToNil(c.annotations),
		},
		Spec: tjSpec,
	}
	c.tj.Spec.Trainer = c.trainerFields(reuse != nil)
	if reuse != nil {
		c.tj.Spec.RuntimeRef = trainer.RuntimeRef{
			Name:     reuse.Name,
			APIGroup: ptr.To(trainer.GroupVersion.Group),
			Kind:     ptr.To(trainer.ClusterTrainingRuntimeKind),
		}
		return
	}
	c.rt = c.generateRuntime()
	c.tj.Spec.RuntimeRef = trainer.RuntimeRef{
		Name:     c.rt.Name,
		APIGroup: ptr.To(trainer.GroupVersion.Group),
		Kind:     ptr.To(trainer.TrainingRuntimeKind),
	}
}

// checkJob reads the numbers a conversion needs and refuses what
// mpi-operator itself would have refused, or what Torus cannot run.
func (c *converter) checkJob() {
	spec := &c.in.Spec
	types := slices.Sorted(maps.Keys(spec.MPIReplicaSpecs))
	for _, t := range types {
		if t != kubeflow.MPIReplicaTypeLauncher && t != kubeflow.MPIReplicaTypeWorker {
			c.r.warn(pathReplicas.Key(string(t)), "mpi-operator runs only Launcher and Worker replicas and ignored this one; dropped")
		}
	}
	launcher := spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher]
	switch {
	case launcher == nil:
		c.r.fail(pathReplicas, "has no Launcher: an MPIJob needs a Launcher replica spec (it runs mpirun)")
	case launcher.Replicas != nil && *launcher.Replicas != 1:
		c.r.fail(replicaPath(kubeflow.MPIReplicaTypeLauncher).Child("replicas"), "is %d; an MPIJob has exactly 1 launcher", *launcher.Replicas)
	case len(launcher.Template.Spec.Containers) == 0:
		c.r.fail(podSpecPath(kubeflow.MPIReplicaTypeLauncher).Child("containers"), "is empty: the launcher needs a container running mpirun")
	}
	worker := spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
	switch {
	case worker == nil:
		c.r.fail(pathReplicas, "has no Worker: Torus runs MPI ranks on at least one worker pod; add a Worker replica spec with replicas of 1 or more")
	case worker.Replicas == nil:
		c.r.fail(replicaPath(kubeflow.MPIReplicaTypeWorker).Child("replicas"), "is not set: say how many workers the job has")
	case *worker.Replicas < 1:
		c.r.fail(replicaPath(kubeflow.MPIReplicaTypeWorker).Child("replicas"), "is %d; an MPI job on Torus needs at least 1 worker", *worker.Replicas)
	case len(worker.Template.Spec.Containers) == 0:
		c.r.fail(podSpecPath(kubeflow.MPIReplicaTypeWorker).Child("containers"), "is empty: workers need a container (it runs sshd and the ranks)")
	default:
		c.workers = *worker.Replicas
	}

	// mpi-operator's values are the Trainer API's; neither has a version.
	if impl, err := mpi.ResolveImplementation(trainer.MPIImplementation(spec.MPIImplementation)); err != nil {
		c.r.fail(pathSpec.Child("mpiImplementation"), "%v", err)
	} else {
		c.impl = impl
	}

	c.slots = ptr.Deref(spec.SlotsPerWorker, 1)
	if c.slots < 1 {
		c.r.fail(pathSpec.Child("slotsPerWorker"), "is %d; each worker needs at least 1 slot (MPI rank)", c.slots)
	}
	c.sshPath = spec.SSHAuthMountPath
	if c.sshPath == "" {
		c.sshPath = mpi.DefaultSSHPath
	} else if !strings.HasPrefix(c.sshPath, "/") {
		c.r.fail(pathSpec.Child("sshAuthMountPath"), "%q is not an absolute path", c.sshPath)
	}
	c.launcherRuns = ptr.Deref(spec.RunLauncherAsWorker, false)
	c.numNodes = c.workers
	if c.launcherRuns {
		c.numNodes++
	}

	if c.workers > 0 {
		if problems := nameProblems(c.in.Name, c.workers); len(problems) > 0 {
			msg := fmt.Sprintf("%q cannot name the TrainJob: it %s", c.in.Name, strings.Join(problems, "; it "))
			if c.in.Name != "" {
				msg += fmt.Sprintf("; rename the MPIJob, e.g. to %q, and convert it again", suggestName(c.in.Name, c.workers))
			}
			c.r.fail(pathMetadata.Child("name"), "%s", msg)
		}
	}
}

// convertTemplate shapes one replica's pod template the way Torus needs
// it, keeping everything mpi-operator would have run.
func (c *converter) convertTemplate(rt kubeflow.MPIReplicaType) corev1.PodTemplateSpec {
	rs := c.in.Spec.MPIReplicaSpecs[rt]
	pt := *rs.Template.DeepCopy()
	ps := &pt.Spec
	psp := podSpecPath(rt)
	mp := mainContainerPath(rt)
	isLauncher := rt == kubeflow.MPIReplicaTypeLauncher

	// mpi-operator's MPI container is the first; Torus's is named "node".
	for i := 1; i < len(ps.Containers); i++ {
		if ps.Containers[i].Name == mpi.TrainerContainer {
			newName := uniqueContainerName(ps, mpi.TrainerContainer+"-sidecar")
			renameContainer(ps, i, newName)
			c.r.warn(psp.Child("containers").Index(i).Child("name"), "sidecar %q renamed %q: Torus runs the MPI program in the container named %q, which mpi-operator's first container becomes",
				mpi.TrainerContainer, newName, mpi.TrainerContainer)
		}
	}
	if old := ps.Containers[0].Name; old != mpi.TrainerContainer {
		renameContainer(ps, 0, mpi.TrainerContainer)
		what := fmt.Sprintf("%q renamed", old)
		if old == "" {
			what = "named"
		}
		c.r.change(mp.Child("name"), "%s %q: Torus and Trainer run the MPI program in the container named %q (mpi-operator used the first container)",
			what, mpi.TrainerContainer, mpi.TrainerContainer)
	}
	main := &ps.Containers[0]

	c.convertRestartPolicy(rt, rs, ps)

	if ps.Hostname != "" {
		c.r.warn(psp.Child("hostname"), "%q removed: JobSet names the pods (%s), as mpi-operator overrode it too", ps.Hostname, mpi.PodHostname(c.in.Name, jobName(rt), 0))
		ps.Hostname = ""
	}
	if ps.Subdomain != "" {
		c.r.warn(psp.Child("subdomain"), "%q removed: the job's subdomain is %q, as mpi-operator overrode it too", ps.Subdomain, mpi.Subdomain(c.in.Name))
		ps.Subdomain = ""
	}
	if ps.HostNetwork {
		if ps.DNSPolicy == "" {
			ps.DNSPolicy = corev1.DNSClusterFirstWithHostNet
			c.r.change(psp.Child("dnsPolicy"), "set to %s, as mpi-operator did for host-network pods, so that pods resolve the job's host names", corev1.DNSClusterFirstWithHostNet)
		}
		c.r.note(psp.Child("hostNetwork"), "kept: sshd listens on port %d of the node's network", mpi.DefaultSSHPort)
	}
	if gangSchedulers[ps.SchedulerName] {
		c.r.warn(psp.Child("schedulerName"), "%q kept, but mpi-operator's PodGroup for it is gone: Kueue admits the whole job at once instead; remove schedulerName unless that scheduler gangs pods by itself", ps.SchedulerName)
	}

	for i, v := range ps.Volumes {
		if mpi.IsTorusVolume(v.Name) {
			c.r.warn(psp.Child("volumes").Index(i).Child("name"), "%q is a volume Torus adds to every pod and replaces yours: rename it", v.Name)
		}
	}
	for i, ic := range ps.InitContainers {
		if mpi.IsTorusInitContainer(ic.Name) {
			c.r.warn(psp.Child("initContainers").Index(i).Child("name"), "%q is an init container Torus adds to its pods and replaces yours: rename it", ic.Name)
		}
	}
	for i, m := range main.VolumeMounts {
		switch {
		case m.MountPath == c.sshPath || strings.HasPrefix(m.MountPath, strings.TrimRight(c.sshPath, "/")+"/"):
			c.r.warn(mp.Child("volumeMounts").Index(i).Child("mountPath"), "%q is inside the SSH directory %q, where Torus mounts the job's SSH files: move it", m.MountPath, c.sshPath)
		case isLauncher && (m.MountPath == mpi.HostfileDir || strings.HasPrefix(m.MountPath, mpi.HostfileDir+"/")):
			c.r.warn(mp.Child("volumeMounts").Index(i).Child("mountPath"), "%q is inside %s, where Torus mounts the hostfile (as mpi-operator did): move it", m.MountPath, mpi.HostfileDir)
		}
	}

	if isLauncher {
		kept := main.Env[:0]
		for i, e := range main.Env {
			if mpi.ReservedEnvNames.Has(e.Name) {
				c.r.warn(mp.Child("env").Index(i), "%s removed: Torus sets it from the job's hostfile and SSH settings", e.Name)
				continue
			}
			kept = append(kept, e)
		}
		main.Env = kept
		c.checkLauncherCommand(main, mp)
	} else {
		c.workerRunsSSHD = rewriteWorkerCommand(main, c.sshPath, mp, &c.r)
		if c.workerRunsSSHD && (main.StartupProbe != nil || main.ReadinessProbe != nil) {
			ensureSSHDProbe(main, mp, &c.r)
		}
	}
	if len(main.Env) == 0 {
		main.Env = nil
	}
	return pt
}

// convertRestartPolicy applies the replica's restartPolicy to its pods, as
// mpi-operator did.
func (c *converter) convertRestartPolicy(rt kubeflow.MPIReplicaType, rs *kubeflow.ReplicaSpec, ps *corev1.PodSpec) {
	rp := rs.RestartPolicy
	rpPath := replicaPath(rt).Child("restartPolicy")
	switch rp {
	case "":
		rp = kubeflow.DefaultRestartPolicy
		if rt == kubeflow.MPIReplicaTypeLauncher {
			rp = kubeflow.DefaultLauncherRestartPolicy
		}
	case kubeflow.RestartPolicyNever, kubeflow.RestartPolicyOnFailure:
	default:
		c.r.fail(rpPath, "%q is not valid for an MPIJob replica: mpi-operator accepts Never and OnFailure", rp)
		return
	}
	if ps.RestartPolicy != "" && ps.RestartPolicy != corev1.RestartPolicy(rp) {
		c.r.warn(podSpecPath(rt).Child("restartPolicy"), "%q ignored: mpi-operator applied the replica's restartPolicy %q to the pods, and so does the converted job", ps.RestartPolicy, rp)
	}
	if rt == kubeflow.MPIReplicaTypeWorker && rp == kubeflow.RestartPolicyOnFailure {
		c.r.warn(rpPath, "OnFailure: mpi-operator restarted a failed worker's container in place; Torus fails the job when a worker fails (a restarted rank cannot rejoin a running MPI world), so workers get restartPolicy Never")
		rp = kubeflow.RestartPolicyNever
	}
	ps.RestartPolicy = corev1.RestartPolicy(rp)
}

// checkLauncherCommand flags launcher command lines that rely on what
// mpi-operator provided and Torus does not.
func (c *converter) checkLauncherCommand(main *corev1.Container, mp fieldPath) {
	check := func(field string, list []string) {
		for i, s := range list {
			p := mp.Child(field).Index(i)
			if strings.Contains(s, "discover_hosts.sh") {
				c.r.warn(p, "refers to mpi-operator's /etc/mpi/discover_hosts.sh (Horovod elastic), which Torus does not provide: the hostfile %s lists the workers", mpi.HostfilePath)
			}
			if strings.Contains(s, c.in.Name+"-worker-") || strings.Contains(s, c.in.Name+"-launcher") {
				c.r.warn(p, "names mpi-operator's pod host names (%s-worker-<i>); Torus's are %s and %s: use the hostfile %s instead of host names",
					c.in.Name, mpi.PodHostname(c.in.Name, mpi.NodeJob, 0), mpi.PodHostname(c.in.Name, mpi.LauncherJob, 0), mpi.HostfilePath)
			}
		}
	}
	check("command", main.Command)
	check("args", main.Args)
}

// convertMetadata carries the MPIJob's labels and annotations to the
// TrainJob and says what of its server-set metadata and status is left.
func (c *converter) convertMetadata() {
	m := &c.in.ObjectMeta
	c.labels = maps.Clone(m.Labels)
	if c.labels == nil {
		c.labels = map[string]string{}
	}
	c.annotations = maps.Clone(m.Annotations)
	if c.annotations == nil {
		c.annotations = map[string]string{}
	}
	if _, ok := c.annotations[corev1.LastAppliedConfigAnnotation]; ok {
		delete(c.annotations, corev1.LastAppliedConfigAnnotation)
		c.r.note(pathMetadata.Child("annotations").Key(corev1.LastAppliedConfigAnnotation), "not carried: it describes the MPIJob, not the TrainJob")
	}
	if len(m.OwnerReferences) > 0 {
		owners := make([]string, 0, len(m.OwnerReferences))
		for _, o := range m.OwnerReferences {
			owners = append(owners, o.Kind+"/"+o.Name)
		}
		c.r.warn(pathMetadata.Child("ownerReferences"), "not carried (%s): owner UIDs belong to the MPIJob; set owners on the TrainJob yourself if it needs them", strings.Join(owners, ", "))
	}
	if len(m.Finalizers) > 0 {
		c.r.warn(pathMetadata.Child("finalizers"), "not carried (%s): they belong to the controllers of the MPIJob", strings.Join(m.Finalizers, ", "))
	}
	if m.UID != "" || m.ResourceVersion != "" || len(m.ManagedFields) > 0 || !m.CreationTimestamp.IsZero() {
		c.r.note(pathMetadata, "uid, resourceVersion, creationTimestamp and managedFields are the server's and not carried")
	}
	if m.GenerateName != "" {
		c.r.note(pathMetadata.Child("generateName"), "not carried: the TrainJob is named %q", m.Name)
	}
	st := &c.in.Status
	switch {
	case hasTrueCondition(st, kubeflow.JobSucceeded):
		c.r.warn(newPath("status"), "the MPIJob has succeeded: a TrainJob made from it runs the job again")
	case hasTrueCondition(st, kubeflow.JobFailed):
		c.r.warn(newPath("status"), "the MPIJob has failed: a TrainJob made from it runs the job again")
	case hasTrueCondition(st, kubeflow.JobRunning, kubeflow.JobRestarting, kubeflow.JobCreated) && !hasTrueCondition(st, kubeflow.JobSuspended):
		c.r.warn(newPath("status"), "the MPIJob is active in the cluster: a TrainJob made from it runs the job a second time; delete the MPIJob (or suspend it) before creating the TrainJob")
	}
}

func hasTrueCondition(st *kubeflow.JobStatus, types ...kubeflow.JobConditionType) bool {
	for _, cond := range st.Conditions {
		if cond.Status == corev1.ConditionTrue && slices.Contains(types, cond.Type) {
			return true
		}
	}
	return false
}

// convertScheduling turns the queue and priority mpi-operator gave a
// PodGroup into Kueue's labels, and says what of the gang settings Kueue
// covers.
func (c *converter) convertScheduling() {
	queueLabelPath := pathMetadata.Child("labels").Key(kueueconstants.QueueLabel)
	if q := c.labels[kueueconstants.QueueLabel]; q != "" {
		c.r.note(queueLabelPath, "kept: Kueue queues the TrainJob in LocalQueue %q", q)
	}
	setLabel := func(p fieldPath, key, value, what string) {
		switch cur := c.labels[key]; cur {
		case "":
			c.labels[key] = value
			c.r.warn(p, "%q set as Kueue label %s=%q: %s", value, key, value, what)
		case value:
			c.r.note(p, "%q: the label %s says the same", value, key)
		default:
			c.r.warn(p, "%q ignored: the label %s=%q already says it", value, key, cur)
		}
	}
	queueWhat := func(q string) string {
		return fmt.Sprintf("it named a Volcano queue; Kueue admits the job only through a LocalQueue %q in the job's namespace", q)
	}
	pol := c.in.Spec.RunPolicy.SchedulingPolicy
	pp := pathRunPolicy.Child("schedulingPolicy")
	if pol != nil && pol.Queue != "" {
		setLabel(pp.Child("queue"), kueueconstants.QueueLabel, pol.Queue, queueWhat(pol.Queue))
	}
	if q := c.annotations[volcanoQueueAnnotation]; q != "" {
		setLabel(pathMetadata.Child("annotations").Key(volcanoQueueAnnotation), kueueconstants.QueueLabel, q, queueWhat(q))
	}
	if pol == nil {
		return
	}
	if pol.PriorityClass != "" {
		setLabel(pp.Child("priorityClass"), kueueconstants.WorkloadPriorityClassLabel, pol.PriorityClass,
			fmt.Sprintf("mpi-operator gave the PodGroup the Kubernetes PriorityClass %q; Kueue reads this label as a WorkloadPriorityClass, which must exist (pods keep their own priorityClassName)", pol.PriorityClass))
	}
	total := c.workers + 1
	if c.launcherRuns {
		total = c.numNodes
	}
	if m := pol.MinAvailable; m != nil {
		if *m >= total {
			c.r.note(pp.Child("minAvailable"), "%d: Kueue admits all %d pods of the job at once, which is what it asked", *m, total)
		} else {
			c.r.warn(pp.Child("minAvailable"), "%d of %d pods dropped: Kueue admits all pods of an MPI job together or none (a partial gang cannot run MPI ranks)", *m, total)
		}
	}
	if pol.MinResources != nil {
		c.r.warn(pp.Child("minResources"), "dropped: Kueue admits the job by the requests of all its pods")
	}
	if pol.ScheduleTimeoutSeconds != nil {
		c.r.warn(pp.Child("scheduleTimeoutSeconds"), "%d dropped: Kueue's waitForPodsReady (cluster configuration) requeues jobs whose pods do not all start in time", *pol.ScheduleTimeoutSeconds)
	}
}

// convertRunPolicy maps runPolicy onto the TrainJob and the runtime.
func (c *converter) convertRunPolicy() trainer.TrainJobSpec {
	rp := &c.in.Spec.RunPolicy
	var spec trainer.TrainJobSpec
	if rp.Suspend != nil {
		spec.Suspend = ptr.To(*rp.Suspend)
		c.r.note(pathRunPolicy.Child("suspend"), "-> spec.suspend")
	}
	if d := rp.ActiveDeadlineSeconds; d != nil {
		if *d < 1 {
			c.r.fail(pathRunPolicy.Child("activeDeadlineSeconds"), "is %d; a TrainJob's deadline is at least 1 second", *d)
		} else {
			spec.ActiveDeadlineSeconds = *d
			c.r.change(pathRunPolicy.Child("activeDeadlineSeconds"), "-> spec.activeDeadlineSeconds=%d, counted from the job's start and each resume, where mpi-operator counted from the launcher's start", *d)
		}
	}
	if b := rp.BackoffLimit; b != nil {
		c.launcherBackoff = ptr.To(*b)
		c.r.note(pathRunPolicy.Child("backoffLimit"), "-> the launcher Job's backoffLimit=%d, as in mpi-operator: a failed launcher is retried with the same workers", *b)
	}
	if t := rp.TTLSecondsAfterFinished; t != nil {
		c.ttl = ptr.To(*t)
		c.r.warn(pathRunPolicy.Child("ttlSecondsAfterFinished"), "-> the JobSet's ttlSecondsAfterFinished=%d: mpi-operator deleted only the launcher Job after %ds; the JobSet's TTL deletes the launcher and the workers (and their logs); the TrainJob and its status stay", *t, *t)
	}
	cp := pathRunPolicy.Child("cleanPodPolicy")
	switch p := rp.CleanPodPolicy; {
	case p == nil:
		c.r.note(cp, "not set (mpi-operator's default None kept running workers after the launcher finished): JobSet deletes running workers when the job finishes")
	case *p == kubeflow.CleanPodPolicyRunning:
		c.r.note(cp, "Running: no TrainJob field; JobSet deletes the workers still running when the job finishes, as Running did, and keeps finished pods for their logs")
	case *p == kubeflow.CleanPodPolicyNone:
		c.r.warn(cp, "None has no equivalent: JobSet deletes the workers still running when the job finishes; finished pods stay")
	case *p == kubeflow.CleanPodPolicyAll:
		c.r.warn(cp, "All has no equivalent: JobSet deletes the workers still running when the job finishes but keeps finished pods (the launcher's, for its logs); set runPolicy.ttlSecondsAfterFinished to delete everything after a while")
	default:
		c.r.fail(cp, "%q is not valid: mpi-operator accepts None, Running and All", *p)
	}
	mb := pathRunPolicy.Child("managedBy")
	switch m := rp.ManagedBy; {
	case m == nil:
	case *m == kubeflow.KubeflowJobController:
		c.r.change(mb, "%q: the TrainJob gets the default controller (%s), which Torus is", *m, mpi.TrainerManagedBy)
	case *m == kubeflow.MultiKueueController:
		spec.ManagedBy = ptr.To(*m)
		c.r.warn(mb, "%q -> spec.managedBy: MultiKueue dispatches the TrainJob to a worker cluster, which needs Torus and the job's runtime; Torus does not run it in this cluster", *m)
	default:
		c.r.fail(mb, "%q is not valid: mpi-operator accepts %s and %s", *m, kubeflow.KubeflowJobController, kubeflow.MultiKueueController)
	}
	lcp := pathSpec.Child("launcherCreationPolicy")
	switch p := c.in.Spec.LauncherCreationPolicy; p {
	case "", kubeflow.LauncherCreationPolicyAtStartup, kubeflow.LauncherCreationPolicyWaitForWorkersReady:
		// Either way, and without a setting: the launcher starts with the
		// workers, and mpirun once every one accepts the job's connections.
		what := string(p)
		if p == "" {
			what = "not set (mpi-operator's default AtStartup)"
		}
		c.r.note(lcp, "%s: Torus starts the launcher with the workers, and mpirun once every worker accepts the job's connections", what)
	default:
		c.r.fail(lcp, "%q is not valid: mpi-operator accepts AtStartup and WaitForWorkersReady", p)
	}
	if c.in.Spec.SlotsPerWorker != nil {
		c.r.note(pathSpec.Child("slotsPerWorker"), "-> numProcPerNode=%d", c.slots)
	}
	c.r.note(replicaPath(kubeflow.MPIReplicaTypeWorker).Child("replicas"), "-> numNodes=%d%s", c.numNodes,
		map[bool]string{true: " (the workers and the launcher, which runs ranks)", false: ""}[c.launcherRuns])
	if c.launcherRuns {
		c.r.note(pathSpec.Child("runLauncherAsWorker"), "-> runLauncherAsNode=true")
	}
	return spec
}

// trainerFields are the TrainJob's own view of the job: sizes, and the
// image, command and resources when they are the same for every pod they
// reach. With a shipped runtime they carry the environment too.
func (c *converter) trainerFields(shippedRuntime bool) *trainer.Trainer {
	l, w := &c.launcher.Spec.Containers[0], &c.worker.Spec.Containers[0]
	t := &trainer.Trainer{NumNodes: ptr.To(c.numNodes), NumProcPerNode: ptr.To(c.slots)}
	if l.Image == w.Image && l.Image != "" {
		t.Image = ptr.To(l.Image)
	} else if !shippedRuntime {
		c.r.note(mainContainerPath(kubeflow.MPIReplicaTypeLauncher).Child("image"), "the launcher's image %q differs from the workers' %q: each keeps its own in the runtime, and the TrainJob names none", l.Image, w.Image)
	}
	t.Command = slices.Clone(l.Command)
	t.Args = slices.Clone(l.Args)
	if res := w.Resources; !isEmptyResources(res) {
		if !c.launcherRuns || resourcesEqual(res, l.Resources) {
			t.ResourcesPerNode = res.DeepCopy()
		} else {
			c.r.note(mainContainerPath(kubeflow.MPIReplicaTypeLauncher).Child("resources"), "the launcher runs ranks with resources other than the workers': each keeps its own in the runtime, and the TrainJob sets no resourcesPerNode")
		}
	}
	if shippedRuntime {
		t.Env = slices.Clone(l.Env)
	}
	return t
}

// generateRuntime makes the namespaced TrainingRuntime that holds the
// job's templates: a node job of workers running sshd, then the launcher,
// which depends on the nodes being Ready (JobSet lets a replicated job
// depend only on those before it).
func (c *converter) generateRuntime() *trainer.TrainingRuntime {
	launcher, worker := *c.launcher.DeepCopy(), *c.worker.DeepCopy()
	lp, wp := mainContainerPath(kubeflow.MPIReplicaTypeLauncher), mainContainerPath(kubeflow.MPIReplicaTypeWorker)
	lc, wc := &launcher.Spec.Containers[0], &worker.Spec.Containers[0]

	added := addEnvIfMissing(lc, corev1.EnvVar{Name: envJobRole, Value: api.RoleLauncher})
	if !c.launcherRuns {
		for _, n := range nvidiaEnv {
			added = append(added, addEnvIfMissing(lc, corev1.EnvVar{Name: n})...)
		}
	}
	if len(added) > 0 {
		c.r.note(lp.Child("env"), "added %s to the launcher, as mpi-operator did", strings.Join(added, ", "))
	}
	if added := addEnvIfMissing(wc, corev1.EnvVar{Name: envJobRole, Value: api.RoleWorker}); len(added) > 0 {
		c.r.note(wp.Child("env"), "added %s to workers, as mpi-operator did", strings.Join(added, ", "))
	}
	if c.workerRunsSSHD {
		ensureSSHDProbe(wc, wp, &c.r)
	}

	mpiPolicy := &trainer.MPIMLPolicySource{
		NumProcPerNode:    ptr.To(c.slots),
		MPIImplementation: ptr.To(c.impl.TrainerValue()),
		SSHAuthMountPath:  ptr.To(c.sshPath),
		RunLauncherAsNode: ptr.To(c.launcherRuns),
	}
	return &trainer.TrainingRuntime{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      c.in.Name,
			Namespace: c.in.Namespace,
			Labels:    map[string]string{labelFramework: "mpi"},
		},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{
				NumNodes:       ptr.To(c.numNodes),
				MLPolicySource: trainer.MLPolicySource{MPI: mpiPolicy},
			},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
				TTLSecondsAfterFinished: c.ttl,
				ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
					{
						Name: mpi.NodeJob,
						Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
							// A failed worker fails the job: its ranks are gone.
							BackoffLimit: ptr.To[int32](0),
							Template:     worker,
						}},
					},
					{
						Name: mpi.LauncherJob,
						Template: batchv1.JobTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mpi.LabelAncestor: mpi.AncestorTrainer}},
							Spec: batchv1.JobSpec{
								BackoffLimit: c.launcherBackoff,
								Template:     launcher,
							},
						},
					},
				},
			}},
		},
	}
}

func jobName(rt kubeflow.MPIReplicaType) string {
	if rt == kubeflow.MPIReplicaTypeLauncher {
		return mpi.LauncherJob
	}
	return mpi.NodeJob
}

// addEnvIfMissing sets variables the container does not set, returning
// their names as NAME=value.
func addEnvIfMissing(c *corev1.Container, vars ...corev1.EnvVar) []string {
	var added []string
	for _, v := range vars {
		if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == v.Name }) {
			continue
		}
		c.Env = append(c.Env, v)
		added = append(added, v.Name+"="+v.Value)
	}
	return added
}

// renameContainer renames container i of a pod and every reference to it
// by name (resourceFieldRef.containerName in env and downward API volumes).
func renameContainer(ps *corev1.PodSpec, i int, newName string) {
	old := ps.Containers[i].Name
	ps.Containers[i].Name = newName
	fix := func(ref *corev1.ResourceFieldSelector) {
		if ref != nil && ref.ContainerName == old {
			ref.ContainerName = newName
		}
	}
	for _, list := range [][]corev1.Container{ps.InitContainers, ps.Containers} {
		for ci := range list {
			for ei := range list[ci].Env {
				if vf := list[ci].Env[ei].ValueFrom; vf != nil {
					fix(vf.ResourceFieldRef)
				}
			}
		}
	}
	for vi := range ps.Volumes {
		v := &ps.Volumes[vi]
		if v.DownwardAPI != nil {
			for ii := range v.DownwardAPI.Items {
				fix(v.DownwardAPI.Items[ii].ResourceFieldRef)
			}
		}
		if v.Projected != nil {
			for si := range v.Projected.Sources {
				if d := v.Projected.Sources[si].DownwardAPI; d != nil {
					for ii := range d.Items {
						fix(d.Items[ii].ResourceFieldRef)
					}
				}
			}
		}
	}
}

func uniqueContainerName(ps *corev1.PodSpec, base string) string {
	taken := func(n string) bool {
		return slices.ContainsFunc(ps.Containers, func(c corev1.Container) bool { return c.Name == n }) ||
			slices.ContainsFunc(ps.InitContainers, func(c corev1.Container) bool { return c.Name == n })
	}
	name := base
	for i := 2; taken(name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}

func isEmptyResources(r corev1.ResourceRequirements) bool {
	return len(r.Limits) == 0 && len(r.Requests) == 0 && len(r.Claims) == 0
}

func resourcesEqual(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Limits, b.Limits) && eq(a.Requests, b.Requests) && slices.Equal(a.Claims, b.Claims)
}

func emptyToNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
