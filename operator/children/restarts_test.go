package children_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/operator/children"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// A job restarts its whole world in the JobSet's and the Job API's own
// terms: a disrupted pod, or torus-launch's exit code for a lost world,
// fails its Job by the pod failure policy, which the JobSet's first rule
// restarts without spending the budget; anything else spends it; every pod
// of a run goes before the next run starts.
func TestBuildJobSetRestartPolicy(t *testing.T) {
	disrupted := jobsetv1alpha2.FailurePolicyRule{
		Name: children.RuleDisrupted, Action: jobsetv1alpha2.RestartJobSetAndIgnoreMaxRestarts,
		OnJobFailureReasons:         []string{batchv1.JobReasonPodFailurePolicy},
		OnJobFailureMessagePatterns: []string{"DisruptionTarget", "with exit code 75 matching FailJob rule"},
	}
	own := jobsetv1alpha2.FailurePolicyRule{Name: "NoRetryOnConfig", Action: jobsetv1alpha2.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonDeadlineExceeded}}
	onDisruption := batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}
	// torus-launch's word that the job's world lost a host.
	onWorldLost := batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(mpi.TrainerContainer), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{75}}}
	cases := map[string]struct {
		annotation  string
		launch      string
		runtime     *jobsetv1alpha2.FailurePolicy
		onFailure   bool
		wantPolicy  *jobsetv1alpha2.FailurePolicy
		wantPodRule bool
	}{
		"no budget: a disruption still restarts": {
			wantPolicy:  &jobsetv1alpha2.FailurePolicy{RestartStrategy: jobsetv1alpha2.BlockingRecreate, Rules: []jobsetv1alpha2.FailurePolicyRule{disrupted}},
			wantPodRule: true,
		},
		"the job's budget": {annotation: "3",
			wantPolicy:  &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobsetv1alpha2.BlockingRecreate, Rules: []jobsetv1alpha2.FailurePolicyRule{disrupted}},
			wantPodRule: true,
		},
		"the runtime's budget, strategy and rules, after Torus's": {
			runtime:     &jobsetv1alpha2.FailurePolicy{MaxRestarts: 5, RestartStrategy: jobsetv1alpha2.Recreate, Rules: []jobsetv1alpha2.FailurePolicyRule{own}},
			wantPolicy:  &jobsetv1alpha2.FailurePolicy{MaxRestarts: 5, RestartStrategy: jobsetv1alpha2.Recreate, Rules: []jobsetv1alpha2.FailurePolicyRule{disrupted, own}},
			wantPodRule: true,
		},
		"the job's budget over the runtime's": {annotation: "0",
			runtime:     &jobsetv1alpha2.FailurePolicy{MaxRestarts: 5, Rules: []jobsetv1alpha2.FailurePolicyRule{disrupted}},
			wantPolicy:  &jobsetv1alpha2.FailurePolicy{RestartStrategy: jobsetv1alpha2.BlockingRecreate, Rules: []jobsetv1alpha2.FailurePolicyRule{disrupted}},
			wantPodRule: true,
		},
		"torus-launch speaks for the launcher and the workers: its exit code for a lost world too": {launch: api.RemoteLaunchAgent,
			wantPolicy:  &jobsetv1alpha2.FailurePolicy{RestartStrategy: jobsetv1alpha2.BlockingRecreate, Rules: []jobsetv1alpha2.FailurePolicyRule{disrupted}},
			wantPodRule: true,
		},
		"pods restarted in place: no pod failure policy, which the Job API refuses for them": {onFailure: true,
			wantPolicy: &jobsetv1alpha2.FailurePolicy{RestartStrategy: jobsetv1alpha2.BlockingRecreate, Rules: []jobsetv1alpha2.FailurePolicyRule{disrupted}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI)
			rt.Spec.Template.Spec.FailurePolicy = tc.runtime
			if tc.onFailure {
				for i := range rt.Spec.Template.Spec.ReplicatedJobs {
					rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				}
			}
			w := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2)
			if tc.annotation != "" {
				w = w.Annotation(api.AnnotationMaxRestarts, tc.annotation)
			}
			// OpenSSH's sshd and mpirun speak for themselves: the
			// disruption alone.
			wantRules := []batchv1.PodFailurePolicyRule{onDisruption}
			if tc.launch != "" {
				w = w.Annotation(api.AnnotationRemoteLaunch, tc.launch)
				wantRules = append(wantRules, onWorldLost)
			}
			js := buildWithLaunchImage(t, w.Obj(), rt)
			if diff := cmp.Diff(tc.wantPolicy, js.Spec.FailurePolicy); diff != "" {
				t.Errorf("failure policy (-want +got):\n%s", diff)
			}
			for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
				pfp := replicatedJob(t, js, name).Template.Spec.PodFailurePolicy
				if !tc.wantPodRule {
					if pfp != nil {
						t.Errorf("%s: pod failure policy %+v, want none", name, pfp)
					}
					continue
				}
				if pfp == nil || !cmp.Equal(pfp.Rules, wantRules) {
					t.Errorf("%s: pod failure policy %+v, want %+v: fail the Job on DisruptionTarget, and on exit code 75 where torus-launch speaks", name, pfp, wantRules)
				}
			}
			// Built twice from the same runtime, the rules are not doubled.
			again := buildWithLaunchImage(t, w.Obj(), rt)
			if !cmp.Equal(js.Spec, again.Spec) {
				t.Error("a second build differs from the first")
			}
		})
	}
}

func buildWithLaunchImage(t *testing.T, tj *trainer.TrainJob, rt *wrappers.RuntimeWrapper) *jobsetv1alpha2.JobSet {
	t.Helper()
	job, err := mpi.ResolveJob(tj, rt.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	js, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{LaunchImage: "torus:1"})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A job's checkpoint claim is mounted in the launcher and every worker, and
// the program learns where it is and which run it is in, also in ranks that
// OpenSSH starts (mpirun forwards the variables).
func TestBuildJobSetCheckpoint(t *testing.T) {
	for _, launch := range []string{api.RemoteLaunchAgent, api.RemoteLaunchOpenSSH} {
		t.Run(launch, func(t *testing.T) {
			tj := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2).
				Annotation(api.AnnotationCheckpointVolume, "ckpt:/data/ckpt").Annotation(api.AnnotationRemoteLaunch, launch).Obj()
			rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI)
			job, err := mpi.ResolveJob(tj, rt.Runtime())
			if err != nil {
				t.Fatal(err)
			}
			js, err := children.BuildJobSet(tj, rt.Runtime(), job, children.BuildOptions{LaunchImage: "torus:1"})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
				ps := replicatedJob(t, js, name).Template.Spec.Template.Spec
				var vol *corev1.Volume
				for i := range ps.Volumes {
					if ps.Volumes[i].Name == mpi.CheckpointVolume {
						vol = &ps.Volumes[i]
					}
				}
				if vol == nil || vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != "ckpt" || vol.PersistentVolumeClaim.ReadOnly {
					t.Errorf("%s: checkpoint volume %+v, want claim ckpt, writable", name, vol)
				}
				ctr := ps.Containers[0]
				if !cmp.Equal(mountsOf(ctr, mpi.CheckpointVolume), []string{"/data/ckpt"}) {
					t.Errorf("%s: checkpoint mounted at %v, want /data/ckpt", name, mountsOf(ctr, mpi.CheckpointVolume))
				}
				env := map[string]corev1.EnvVar{}
				for _, e := range ctr.Env {
					env[e.Name] = e
				}
				if env[mpi.EnvCheckpointDir].Value != "/data/ckpt" {
					t.Errorf("%s: %s = %q", name, mpi.EnvCheckpointDir, env[mpi.EnvCheckpointDir].Value)
				}
				if r := env[mpi.EnvRunAttempt].ValueFrom; r == nil || r.FieldRef == nil || r.FieldRef.FieldPath != "metadata.labels['jobset.sigs.k8s.io/restart-attempt']" {
					t.Errorf("%s: %s = %+v, want JobSet's restart-attempt label", name, mpi.EnvRunAttempt, r)
				}
				if name == mpi.LauncherJob {
					forwarded := env["OMPI_MCA_mca_base_env_list"].Value
					for _, v := range []string{mpi.EnvCheckpointDir, mpi.EnvRunAttempt} {
						if !strings.Contains(forwarded, v) {
							t.Errorf("mpirun forwards %q, without %s", forwarded, v)
						}
					}
				}
			}
		})
	}
}

func mountsOf(ctr corev1.Container, volume string) []string {
	var out []string
	for _, m := range ctr.VolumeMounts {
		if m.Name == volume {
			out = append(out, m.MountPath)
		}
	}
	return out
}

// A job's grace period is every pod's, the launcher's too, whether the job
// or its runtime sets it; without one, the runtime's pods keep theirs.
func TestBuildJobSetTerminationGracePeriod(t *testing.T) {
	cases := map[string]struct {
		job, runtime string
		want         *int64
	}{
		"the job's":           {job: "5m", want: ptr.To[int64](300)},
		"the runtime's":       {runtime: "90s", want: ptr.To[int64](90)},
		"the job's over it":   {job: "2m", runtime: "90s", want: ptr.To[int64](120)},
		"none: the pods' own": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := wrappers.MakeMPIRuntime("rt", trainer.MPIImplementationOpenMPI)
			if tc.runtime != "" {
				rt.Annotation(api.AnnotationTerminationGracePeriod, tc.runtime)
			}
			w := wrappers.MakeTrainJob("pi", "ns").RuntimeRef("rt").NumNodes(2)
			if tc.job != "" {
				w = w.Annotation(api.AnnotationTerminationGracePeriod, tc.job)
			}
			js := buildWithLaunchImage(t, w.Obj(), rt)
			for _, name := range []string{mpi.LauncherJob, mpi.NodeJob} {
				if got := replicatedJob(t, js, name).Template.Spec.Template.Spec.TerminationGracePeriodSeconds; !cmp.Equal(got, tc.want) {
					t.Errorf("%s: terminationGracePeriodSeconds %v, want %v", name, ptr.Deref(got, -1), ptr.Deref(tc.want, -1))
				}
			}
		})
	}
}
