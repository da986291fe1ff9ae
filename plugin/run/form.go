package run

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
	"github.com/torus-mpi/torus/plugin/cmdutil"
)

// Form is a job as the dashboard's create form holds it: run's flags, each
// under its flag's name, as typed. An empty field is a flag not given.
type Form struct {
	Name              string   `json:"name"`
	Namespace         string   `json:"namespace"`
	Image             string   `json:"image,omitempty"`
	Command           string   `json:"command,omitempty"`
	Workers           string   `json:"workers,omitempty"`
	SlotsPerWorker    string   `json:"slots-per-worker,omitempty"`
	GPUs              string   `json:"gpus,omitempty"`
	CPU               string   `json:"cpu,omitempty"`
	Memory            string   `json:"memory,omitempty"`
	MPI               string   `json:"mpi,omitempty"`
	Runtime           string   `json:"runtime,omitempty"`
	Queue             string   `json:"queue,omitempty"`
	Priority          string   `json:"priority,omitempty"`
	Network           string   `json:"network,omitempty"`
	Topology          string   `json:"topology,omitempty"`
	SchedulingTimeout string   `json:"scheduling-timeout,omitempty"`
	MaxRestarts       string   `json:"max-restarts,omitempty"`
	Checkpoint        string   `json:"checkpoint-volume,omitempty"`
	GracePeriod       string   `json:"termination-grace-period,omitempty"`
	StallTimeout      string   `json:"stall-timeout,omitempty"`
	Env               []string `json:"env,omitempty"`
	// Volumes are PersistentVolumeClaims as --volume takes them:
	// pvc:CLAIM:/path[:ro].
	Volumes          []string `json:"volume,omitempty"`
	ImagePullSecrets []string `json:"image-pull-secret,omitempty"`
	ServiceAccount   string   `json:"service-account,omitempty"`
	Launch           string   `json:"launch,omitempty"`
}

// FieldError is a problem of a form, under the field it concerns ("" for
// the whole job).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Outcome is what submitting a form did: the job, what did not stop it,
// or every problem found.
type Outcome struct {
	TrainJob *trainer.TrainJob `json:"trainJob,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
	// Notes say what the job will meet: its queue's free quota now, a
	// namespace quota it would exceed.
	Notes  []string     `json:"notes,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
}

// SubmitForm checks a form with run's own rules, then against the
// cluster (runtime, queue) as run does, then by the API server and its
// webhooks (a dry run when dryRun), and creates the job unless dryRun.
// Every write is made with c's identity.
func SubmitForm(ctx context.Context, c client.Client, f Form, dryRun bool) Outcome {
	flags, errs := f.flags()
	command, err := splitWords(f.Command)
	if err != nil {
		errs = append(errs, FieldError{Field: "command", Message: err.Error()})
	}
	bad := map[string]bool{}
	for _, e := range errs {
		bad[e.Field] = true
	}
	// A number that did not parse is reported once, not again as zero.
	set := func(flag string) bool { return f.value(flag) != "" && !bad[flag] }
	spec, err := flags.Spec(f.Name, f.Namespace, command, set)
	errs = append(errs, fieldErrors(err)...)
	if f.Name == "" {
		errs = append(errs, FieldError{Field: "name", Message: "a job needs a name"})
	}
	if len(errs) > 0 {
		return Outcome{Errors: errs}
	}
	plan, err := prepare(ctx, c, spec)
	if err != nil {
		return Outcome{Errors: fieldErrors(err)}
	}
	mode := cmdutil.DryRunServer
	if !dryRun {
		mode = ""
	}
	if err := submitPlan(ctx, c, plan, mode); err != nil {
		return Outcome{Warnings: plan.Warnings, Notes: plan.Notes, Errors: apiErrors(err)}
	}
	return Outcome{TrainJob: plan.TrainJob, Warnings: plan.Warnings, Notes: plan.Notes}
}

// flags reads the form's numbers; the rest run's flags parse themselves.
func (f Form) flags() (*jobFlags, []FieldError) {
	flags := &jobFlags{Image: f.Image, CPU: f.CPU, Memory: f.Memory, MPI: f.MPI, Runtime: f.Runtime, Queue: f.Queue, Priority: strings.TrimSpace(f.Priority),
		Network: f.Network, Topology: f.Topology, SchedulingTimeout: f.SchedulingTimeout, MaxRestarts: strings.TrimSpace(f.MaxRestarts),
		Checkpoint: strings.TrimSpace(f.Checkpoint), TerminationGracePeriod: strings.TrimSpace(f.GracePeriod),
		StallTimeout: strings.TrimSpace(f.StallTimeout), ServiceAccount: strings.TrimSpace(f.ServiceAccount), Launch: f.Launch}
	for _, s := range f.ImagePullSecrets {
		if s = strings.TrimSpace(s); s != "" {
			flags.ImagePullSecrets = append(flags.ImagePullSecrets, s)
		}
	}
	for _, e := range f.Env {
		if strings.TrimSpace(e) != "" {
			flags.Env = append(flags.Env, e)
		}
	}
	for _, v := range f.Volumes {
		if v = strings.TrimSpace(v); v != "" {
			flags.Volumes = append(flags.Volumes, v)
		}
	}
	var errs []FieldError
	for _, n := range []struct {
		flag string
		dst  func(int64)
	}{
		{flagWorkers, func(v int64) { flags.Workers = int32(v) }},
		{flagSlotsPerWorker, func(v int64) { flags.SlotsPerWorker = int32(v) }},
		{flagGPUs, func(v int64) { flags.GPUs = v }},
	} {
		s := f.value(n.flag)
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			errs = append(errs, FieldError{Field: n.flag, Message: fmt.Sprintf("--%s=%q is not a whole number", n.flag, s)})
			continue
		}
		n.dst(v)
	}
	return flags, errs
}

// value is the field of a flag, by the flag's name.
func (f Form) value(flag string) string {
	switch flag {
	case flagImage:
		return f.Image
	case flagWorkers:
		return f.Workers
	case flagSlotsPerWorker:
		return f.SlotsPerWorker
	case flagGPUs:
		return f.GPUs
	case flagCPU:
		return f.CPU
	case flagMemory:
		return f.Memory
	case flagMPI:
		return f.MPI
	case flagRuntime:
		return f.Runtime
	case flagQueue:
		return f.Queue
	case flagPriority:
		return f.Priority
	case flagNetwork:
		return f.Network
	case flagTopology:
		return f.Topology
	case flagSchedTimeout:
		return f.SchedulingTimeout
	case flagMaxRestarts:
		return f.MaxRestarts
	case flagCheckpoint:
		return f.Checkpoint
	case flagGracePeriod:
		return f.GracePeriod
	case flagStallTimeout:
		return f.StallTimeout
	case flagServiceAccount:
		return f.ServiceAccount
	case flagLaunch:
		return f.Launch
	}
	return ""
}

// apiErrors sorts the API server's answer under the form's fields, by the
// field paths it names.
func apiErrors(err error) []FieldError {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return fieldErrors(err)
	}
	var out []FieldError
	for _, c := range status.Status().Details.Causes {
		out = append(out, FieldError{Field: formFieldOf(c.Field), Message: strings.TrimSpace(c.Field + " " + c.Message)})
	}
	return out
}

// formFieldOf is the form field of a TrainJob field path.
func formFieldOf(path string) string {
	for _, p := range []struct{ prefix, field string }{
		{"metadata.name", "name"},
		{"spec.trainer.image", flagImage},
		{"spec.trainer.command", "command"},
		{"spec.trainer.args", "command"},
		{"spec.trainer.numNodes", flagWorkers},
		{"spec.trainer.numProcPerNode", flagSlotsPerWorker},
		{"spec.trainer.env", flagEnv},
		{"spec.trainer.resourcesPerNode", flagCPU},
		{"spec.runtimeRef", flagRuntime},
		{"metadata.labels[" + mpi.KueueQueueLabel + "]", flagQueue},
		{"metadata.labels[" + mpi.KueuePriorityLabel + "]", flagPriority},
		{"metadata.annotations[" + api.AnnotationNetworkProfile + "]", flagNetwork},
		{"metadata.annotations[" + api.AnnotationTopology + "]", flagTopology},
		{"metadata.annotations[" + api.AnnotationSchedulingTimeout + "]", flagSchedTimeout},
		{"metadata.annotations[" + api.AnnotationMaxRestarts + "]", flagMaxRestarts},
		{"metadata.annotations[" + api.AnnotationCheckpointVolume + "]", flagCheckpoint},
		{"metadata.annotations[" + api.AnnotationTerminationGracePeriod + "]", flagGracePeriod},
		{"metadata.annotations[" + api.AnnotationStallTimeout + "]", flagStallTimeout},
		{"metadata.annotations[" + api.AnnotationRemoteLaunch + "]", flagLaunch},
	} {
		if strings.HasPrefix(path, p.prefix) {
			return p.field
		}
	}
	// The runtime patch run writes, by the pod field.
	if strings.HasPrefix(path, "spec.runtimePatches") {
		for _, p := range []struct{ part, field string }{
			{".volumes", flagVolume},
			{".volumeMounts", flagVolume},
			{".imagePullSecrets", flagPullSecret},
			{".serviceAccountName", flagServiceAccount},
		} {
			if strings.Contains(path, p.part) {
				return p.field
			}
		}
	}
	return ""
}

// FormOf fills a form from a job, for "clone and modify": what rerun
// copies, as run's flags would give it. copied is the job's own copy of its
// runtime (api.AnnotationRuntimeCopyOf), where its volumes are, or nil;
// the volumes, image pull secrets and service account of run's runtime
// patch are read from the job. notes say what of the job the form cannot
// carry.
func FormOf(tj *trainer.TrainJob, copied *trainer.TrainingRuntime) (f Form, notes []string) {
	f = Form{Namespace: tj.Namespace, Queue: tj.Labels[mpi.KueueQueueLabel], Priority: tj.Labels[mpi.KueuePriorityLabel],
		Network: tj.Annotations[api.AnnotationNetworkProfile], Topology: tj.Annotations[api.AnnotationTopology],
		SchedulingTimeout: tj.Annotations[api.AnnotationSchedulingTimeout], MaxRestarts: tj.Annotations[api.AnnotationMaxRestarts],
		Checkpoint: tj.Annotations[api.AnnotationCheckpointVolume], GracePeriod: tj.Annotations[api.AnnotationTerminationGracePeriod],
		StallTimeout: tj.Annotations[api.AnnotationStallTimeout], Launch: tj.Annotations[api.AnnotationRemoteLaunch]}
	f.Runtime = tj.Spec.RuntimeRef.Name
	if k := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind); k != trainer.ClusterTrainingRuntimeKind {
		f.Runtime = k + "/" + f.Runtime
	}
	if copyOf, ok := tj.Annotations[api.AnnotationRuntimeCopyOf]; ok {
		// The job's own copy goes with it: the clone starts from the
		// runtime it copied, with the volumes the copy added.
		f.Runtime = strings.TrimPrefix(copyOf, trainer.ClusterTrainingRuntimeKind+"/")
		f.Volumes = volumesOf(copied)
	}
	vols, pullSecrets, serviceAccount := patched(tj)
	for _, v := range vols {
		f.Volumes = append(f.Volumes, v.String())
	}
	f.ImagePullSecrets, f.ServiceAccount = pullSecrets, serviceAccount
	for _, p := range tj.Spec.RuntimePatches {
		if p.Manager != patchManager && p.Manager != mpi.KueueManager {
			notes = append(notes, fmt.Sprintf("the runtime patch of %s is not one the form carries: the clone goes without it", p.Manager))
		}
	}
	if _, versioned := tj.Annotations[api.AnnotationOpenMPIVersion]; versioned {
		// The implementation the job asked for over its runtime's
		// (run --mpi openmpi5 on an Open MPI runtime).
		if impl := mpi.Implementation(tj.Labels[api.LabelImplementation]); impl != "" {
			f.MPI = impl.CLIName()
		}
	}
	t := tj.Spec.Trainer
	if t == nil {
		return f, notes
	}
	f.Image = ptr.Deref(t.Image, "")
	f.Command = joinWords(append(append([]string{}, t.Command...), t.Args...))
	if t.NumNodes != nil {
		f.Workers = fmt.Sprint(*t.NumNodes)
	}
	if t.NumProcPerNode != nil {
		f.SlotsPerWorker = fmt.Sprint(*t.NumProcPerNode)
	}
	for _, e := range t.Env {
		if e.ValueFrom != nil {
			notes = append(notes, fmt.Sprintf("%s takes its value from a reference (a Secret, a ConfigMap, a field), which the form cannot carry: the clone goes without it", e.Name))
			continue
		}
		f.Env = append(f.Env, e.Name+"="+e.Value)
	}
	if r := t.ResourcesPerNode; r != nil {
		if q, ok := r.Requests[corev1.ResourceCPU]; ok {
			f.CPU = q.String()
		}
		if q, ok := r.Requests[corev1.ResourceMemory]; ok {
			f.Memory = q.String()
		}
		for name, q := range r.Limits {
			if strings.Contains(string(name), "/") {
				f.GPUs = q.String()
			}
		}
	}
	return f, notes
}

// volumesOf reads back, as --volume takes them, the claims run mounted into
// a runtime copy's launcher.
func volumesOf(rt *trainer.TrainingRuntime) []string {
	if rt == nil {
		return nil
	}
	var out []string
	for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rj.Name != mpi.LauncherJob {
			continue
		}
		ps := rj.Template.Spec.Template.Spec
		for _, c := range ps.Containers {
			if c.Name != mpi.TrainerContainer {
				continue
			}
			for _, m := range c.VolumeMounts {
				for _, v := range ps.Volumes {
					if v.Name != m.Name || v.PersistentVolumeClaim == nil || v.Name != (Volume{Claim: v.PersistentVolumeClaim.ClaimName}).Name() {
						continue
					}
					out = append(out, Volume{Claim: v.PersistentVolumeClaim.ClaimName, MountPath: m.MountPath, ReadOnly: m.ReadOnly}.String())
				}
			}
		}
	}
	return out
}

// splitWords splits a command line as a shell would into words: spaces
// separate them, single and double quotes keep them together, a backslash
// takes the next character as it is.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fieldErr("command", "the command has an unclosed %c quote", quote)
	}
	if escaped {
		return nil, fieldErr("command", "the command ends with a lone backslash")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// joinWords writes words as one command line that splitWords reads back.
func joinWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && !strings.ContainsAny(w, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			out[i] = w
			continue
		}
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
