package migrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

// maxBlockers bounds how many reasons against reuse a note lists.
const maxBlockers = 4

// chooseShipped returns the shipped runtime that, with the TrainJob's own
// fields, runs the job as converted, or nil. It says why not in a note, or
// what the shipped runtime adds when it is chosen.
func (c *converter) chooseShipped() *trainer.ClusterTrainingRuntime {
	rt, err := shippedRuntime(c.impl)
	if err != nil {
		c.r.note(newPath(), "a TrainingRuntime is generated: %v", err)
		return nil
	}
	blockers, changes := c.reuseBlockers(rt)
	if len(blockers) > 0 {
		if len(blockers) > maxBlockers {
			blockers = append(blockers[:maxBlockers], fmt.Sprintf("%d more", len(blockers)-maxBlockers))
		}
		c.r.note(newPath(), "TrainingRuntime %q generated, holding the job's templates: the shipped ClusterTrainingRuntime %s does not express %s",
			c.in.Name, rt.Name, strings.Join(blockers, ", "))
		return nil
	}
	c.r.note(newPath(), "uses the shipped ClusterTrainingRuntime %s: the TrainJob carries the image, command, environment and worker resources", rt.Name)
	for _, ch := range changes {
		c.r.change(ch.path, "%s", ch.message)
	}
	return rt
}

type pendingChange struct {
	path    fieldPath
	message string
}

// reuseBlockers compares the converted job with what Torus would run from
// the shipped runtime rt and the TrainJob's fields. Differences block
// reuse, except the shipped runtime's hardening where the MPIJob leaves a
// field unset, and defaults that mpi-operator applied implicitly; those are
// returned as changes to report.
func (c *converter) reuseBlockers(rt *trainer.ClusterTrainingRuntime) (blockers []string, changes []pendingChange) {
	policy := rt.Spec.MLPolicy
	if policy == nil || policy.MPI == nil {
		return []string{"an MPI policy"}, nil
	}
	if p := ptr.Deref(policy.MPI.SSHAuthMountPath, mpi.DefaultSSHPath); p != c.sshPath {
		blockers = append(blockers, fmt.Sprintf("sshAuthMountPath %s (it has %s)", c.sshPath, p))
	}
	if ptr.Deref(policy.MPI.RunLauncherAsNode, false) != c.launcherRuns {
		blockers = append(blockers, "runLauncherAsWorker")
	}
	if c.ttl != nil && !reflect.DeepEqual(c.ttl, rt.Spec.Template.Spec.TTLSecondsAfterFinished) {
		blockers = append(blockers, "ttlSecondsAfterFinished")
	}
	rl, rn := findReplicatedJob(rt.Spec.Template.Spec.ReplicatedJobs, mpi.LauncherJob), findReplicatedJob(rt.Spec.Template.Spec.ReplicatedJobs, mpi.NodeJob)
	if rl == nil || rn == nil {
		return append(blockers, "a launcher and a node job"), nil
	}
	lc, wc := &c.launcher.Spec.Containers[0], &c.worker.Spec.Containers[0]
	if lc.Image != wc.Image {
		blockers = append(blockers, "different launcher and worker images")
	}
	if !equality.Semantic.DeepEqual(lc.Env, wc.Env) {
		blockers = append(blockers, "different launcher and worker environments")
	}

	specs := c.in.Spec.MPIReplicaSpecs
	lp := replicaPath(kubeflow.MPIReplicaTypeLauncher)
	shippedBackoff := ptr.Deref(rl.Template.Spec.BackoffLimit, mpiOperatorLauncherBackoff)
	switch {
	case c.launcherBackoff != nil && *c.launcherBackoff != shippedBackoff:
		blockers = append(blockers, fmt.Sprintf("runPolicy.backoffLimit %d (it has %d)", *c.launcherBackoff, shippedBackoff))
	case c.launcherBackoff == nil && shippedBackoff != mpiOperatorLauncherBackoff:
		changes = append(changes, pendingChange{pathRunPolicy.Child("backoffLimit"), fmt.Sprintf(
			"not set: mpi-operator retried a failed launcher up to %d times; %s's launcher Job has backoffLimit %d (use --runtime-mode=generate, or set backoffLimit, to keep retries)",
			mpiOperatorLauncherBackoff, rt.Name, shippedBackoff)})
	}
	shippedLauncherRP := rl.Template.Spec.Template.Spec.RestartPolicy
	if specs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy != "" {
		if c.launcher.Spec.RestartPolicy != shippedLauncherRP {
			blockers = append(blockers, fmt.Sprintf("launcher restartPolicy %s (it has %s)", c.launcher.Spec.RestartPolicy, shippedLauncherRP))
		}
	} else if c.launcher.Spec.RestartPolicy != shippedLauncherRP {
		changes = append(changes, pendingChange{lp.Child("restartPolicy"), fmt.Sprintf(
			"not set: mpi-operator's launcher restarted in place (%s); %s's launcher has restartPolicy %s", c.launcher.Spec.RestartPolicy, rt.Name, shippedLauncherRP)})
	}
	if shippedWorkerRP := rn.Template.Spec.Template.Spec.RestartPolicy; c.worker.Spec.RestartPolicy != shippedWorkerRP {
		blockers = append(blockers, fmt.Sprintf("worker restartPolicy %s (it has %s)", c.worker.Spec.RestartPolicy, shippedWorkerRP))
	}

	shippedWorker := mainContainer(&rn.Template.Spec.Template.Spec)
	if shippedWorker == nil || mainContainer(&rl.Template.Spec.Template.Spec) == nil {
		return append(blockers, "a node container in both jobs"), nil
	}
	// A TrainJob sets the launcher's command and args only when it has
	// them: it cannot clear the shipped runtime's.
	shippedLauncher := mainContainer(&rl.Template.Spec.Template.Spec)
	if len(lc.Command) == 0 && len(shippedLauncher.Command) > 0 {
		blockers = append(blockers, "a launcher without command (its image's entrypoint)")
	}
	if len(lc.Args) == 0 && len(shippedLauncher.Args) > 0 {
		blockers = append(blockers, "a launcher without args")
	}
	got, want := append(slices.Clone(wc.Command), wc.Args...), append(slices.Clone(shippedWorker.Command), shippedWorker.Args...)
	if !slices.Equal(got, want) {
		blockers = append(blockers, fmt.Sprintf("the worker command %q (it runs %q)", strings.Join(got, " "), strings.Join(want, " ")))
	}
	probePath := mainContainerPath(kubeflow.MPIReplicaTypeWorker).Child("startupProbe")
	mine, shipped := sshdProbe(wc), sshdProbe(shippedWorker)
	switch {
	case mine == nil && shipped != nil:
		changes = append(changes, pendingChange{probePath, fmt.Sprintf("none set: %s's workers are Ready once sshd answers", rt.Name)})
	case equality.Semantic.DeepEqual(wc.StartupProbe, shippedWorker.StartupProbe) &&
		equality.Semantic.DeepEqual(wc.ReadinessProbe, shippedWorker.ReadinessProbe):
	case sameTCPProbe(mine, shipped):
		changes = append(changes, pendingChange{probePath, fmt.Sprintf("replaced by %s's probe on the same port, with its timings", rt.Name)})
	default:
		blockers = append(blockers, "the worker's startupProbe and readinessProbe")
	}

	for _, side := range []struct {
		rt      kubeflow.MPIReplicaType
		mine    corev1.PodTemplateSpec
		shipped corev1.PodTemplateSpec
	}{
		{kubeflow.MPIReplicaTypeLauncher, c.launcher, rl.Template.Spec.Template},
		{kubeflow.MPIReplicaTypeWorker, c.worker, rn.Template.Spec.Template},
	} {
		mine := residual(side.mine, side.rt == kubeflow.MPIReplicaTypeLauncher)
		theirs := residual(side.shipped, side.rt == kubeflow.MPIReplicaTypeLauncher)
		hardening := tolerateHardening(&mine, &theirs)
		if equality.Semantic.DeepEqual(mine, theirs) {
			if len(hardening) > 0 {
				changes = append(changes, pendingChange{podSpecPath(side.rt).Child("securityContext"),
					fmt.Sprintf("%s pods also get %s's hardening: %s", strings.ToLower(string(side.rt)), rt.Name, strings.Join(hardening, ", "))})
			}
			continue
		}
		for _, d := range diffPaths(mine, theirs) {
			blockers = append(blockers, fmt.Sprintf("the %s's %s", strings.ToLower(string(side.rt)), d))
		}
	}
	if len(blockers) == 0 {
		changes = append(changes, pendingChange{newPath(), fmt.Sprintf(
			"%s sets no %s: mpi-operator set it to launcher or worker", rt.Name, envJobRole)})
	}
	return blockers, changes
}

func findReplicatedJob(jobs []jobsetv1alpha2.ReplicatedJob, name string) *jobsetv1alpha2.ReplicatedJob {
	for i := range jobs {
		if jobs[i].Name == name {
			return &jobs[i]
		}
	}
	return nil
}

func mainContainer(ps *corev1.PodSpec) *corev1.Container {
	for i := range ps.Containers {
		if ps.Containers[i].Name == mpi.TrainerContainer {
			return &ps.Containers[i]
		}
	}
	return nil
}

// sshdProbe is the probe that makes a worker Ready once sshd answers: its
// startup probe, else its readiness probe.
func sshdProbe(c *corev1.Container) *corev1.Probe {
	if c.StartupProbe != nil {
		return c.StartupProbe
	}
	return c.ReadinessProbe
}

func sameTCPProbe(a, b *corev1.Probe) bool {
	return a != nil && b != nil && a.TCPSocket != nil && b.TCPSocket != nil && a.TCPSocket.Port == b.TCPSocket.Port
}

// residual is what of a pod template the TrainJob's fields do not set:
// the node container's image, environment and (launcher) command, the
// workers' resources; restart policy, worker command and probes are
// compared on their own.
func residual(pt corev1.PodTemplateSpec, launcher bool) corev1.PodTemplateSpec {
	pt = *pt.DeepCopy()
	pt.Spec.RestartPolicy = ""
	if c := mainContainer(&pt.Spec); c != nil {
		c.Image, c.Env, c.Command, c.Args = "", nil, nil, nil
		if !launcher {
			c.Resources = corev1.ResourceRequirements{}
			c.StartupProbe, c.ReadinessProbe = nil, nil
		}
	}
	return pt
}

// tolerateHardening removes from theirs the security settings a shipped
// runtime adds where mine leaves them unset, returning what they are.
func tolerateHardening(mine, theirs *corev1.PodTemplateSpec) []string {
	var added []string
	if t := theirs.Spec.SecurityContext; t != nil {
		m := mine.Spec.SecurityContext
		if t.RunAsNonRoot != nil && (m == nil || m.RunAsNonRoot == nil) {
			added = append(added, "runAsNonRoot: "+strconv.FormatBool(*t.RunAsNonRoot))
			t.RunAsNonRoot = nil
		}
		if t.SeccompProfile != nil && (m == nil || m.SeccompProfile == nil) {
			added = append(added, "seccompProfile "+string(t.SeccompProfile.Type))
			t.SeccompProfile = nil
		}
	}
	mc, tc := mainContainer(&mine.Spec), mainContainer(&theirs.Spec)
	if mc != nil && tc != nil && tc.SecurityContext != nil {
		t, m := tc.SecurityContext, mc.SecurityContext
		if t.AllowPrivilegeEscalation != nil && (m == nil || m.AllowPrivilegeEscalation == nil) {
			added = append(added, "allowPrivilegeEscalation: "+strconv.FormatBool(*t.AllowPrivilegeEscalation))
			t.AllowPrivilegeEscalation = nil
		}
		if t.Capabilities != nil && (m == nil || m.Capabilities == nil) {
			var drop []string
			for _, d := range t.Capabilities.Drop {
				drop = append(drop, string(d))
			}
			added = append(added, "capabilities drop "+strings.Join(drop, ","))
			t.Capabilities = nil
		}
	}
	// The default runtimes fix no UID: the operator runs them as
	// mpi.DefaultRunAsUser where the platform assigns none, as
	// mpi-operator's examples ask, and OpenShift assigns one from the
	// namespace's range, which it would also demand of the MPIJob.
	uidNote := fmt.Sprintf("runAsUser %d where the platform assigns no UID (OpenShift assigns one)", mpi.DefaultRunAsUser)
	if m := mine.Spec.SecurityContext; m != nil && ptr.Equal(m.RunAsUser, ptr.To(mpi.DefaultRunAsUser)) &&
		(theirs.Spec.SecurityContext == nil || theirs.Spec.SecurityContext.RunAsUser == nil) {
		m.RunAsUser = nil
		added = append(added, uidNote)
	}
	if mc != nil && mc.SecurityContext != nil && ptr.Equal(mc.SecurityContext.RunAsUser, ptr.To(mpi.DefaultRunAsUser)) &&
		(tc == nil || tc.SecurityContext == nil || tc.SecurityContext.RunAsUser == nil) {
		mc.SecurityContext.RunAsUser = nil
		added = append(added, uidNote)
	}
	normalizeSecurityContexts(mine)
	normalizeSecurityContexts(theirs)
	return added
}

func normalizeSecurityContexts(pt *corev1.PodTemplateSpec) {
	if sc := pt.Spec.SecurityContext; sc != nil && equality.Semantic.DeepEqual(*sc, corev1.PodSecurityContext{}) {
		pt.Spec.SecurityContext = nil
	}
	for i := range pt.Spec.Containers {
		if sc := pt.Spec.Containers[i].SecurityContext; sc != nil && equality.Semantic.DeepEqual(*sc, corev1.SecurityContext{}) {
			pt.Spec.Containers[i].SecurityContext = nil
		}
	}
}

// diffPaths lists the fields in which two objects' JSON forms differ,
// e.g. spec.containers[0].resources.
func diffPaths(a, b any) []string {
	var x, y any
	if err := roundTrip(a, &x); err != nil {
		return []string{err.Error()}
	}
	if err := roundTrip(b, &y); err != nil {
		return []string{err.Error()}
	}
	var out []string
	walkDiff(x, y, "", &out)
	return out
}

func roundTrip(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding for comparison: %w", err)
	}
	return json.Unmarshal(data, out)
}

func walkDiff(a, b any, prefix string, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := slices.Sorted(maps.Keys(am))
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walkDiff(am[k], bm[k], p, out)
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			walkDiff(as[i], bs[i], prefix+"["+strconv.Itoa(i)+"]", out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, strings.TrimPrefix(prefix, "spec."))
	}
}
