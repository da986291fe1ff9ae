package run

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/internal/wrappers"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestSplitWordsReadsWhatJoinWordsWrites(t *testing.T) {
	for _, words := range [][]string{
		{"mpirun", "-n", "4", "python3", "/opt/pi.py"},
		{"sh", "-c", "sleep 5 && exec mpirun -n 4 ./a.out"},
		{"echo", "it's", `"quoted"`, "back\\slash", ""},
	} {
		got, err := splitWords(joinWords(words))
		if err != nil {
			t.Fatalf("%q: %v", words, err)
		}
		if diff := cmp.Diff(words, got); diff != "" {
			t.Errorf("round trip of %q (-want,+got):\n%s", words, diff)
		}
	}
	for _, bad := range []string{`echo 'open`, `echo "open`, `echo \`} {
		if _, err := splitWords(bad); err == nil {
			t.Errorf("splitWords(%q) accepted it", bad)
		}
	}
}

// A form's problems are found without the cluster, each under its field,
// in run's own words.
func TestSubmitFormNamesTheField(t *testing.T) {
	tests := []struct {
		name string
		form Form
		want []FieldError
	}{{
		name: "workers and memory",
		form: Form{Name: "pi", Namespace: "ns", Workers: "0", Memory: "lots"},
		want: []FieldError{
			{Field: "memory", Message: `--memory="lots" is not a quantity: write it as Kubernetes does, e.g. 512Mi or 16Gi`},
			{Field: "workers", Message: "--workers=0: a job needs at least 1 worker"},
		},
	}, {
		name: "not a number",
		form: Form{Name: "pi", Namespace: "ns", SlotsPerWorker: "two"},
		want: []FieldError{{Field: "slots-per-worker", Message: `--slots-per-worker="two" is not a whole number`}},
	}, {
		name: "a name no host name can take, and a reserved variable",
		form: Form{Name: "Pi_Job", Namespace: "ns", Env: []string{"OMPI_MCA_orte_default_hostfile=/x"}},
		want: []FieldError{
			{Field: "name", Message: `job name "Pi_Job" is not an RFC 1035 label: use lowercase letters, digits and '-', start with a letter and end with a letter or digit`},
			{Field: "env", Message: "--env OMPI_MCA_orte_default_hostfile: Torus sets OMPI_MCA_orte_default_hostfile from the job's hostfile and SSH settings; remove it"},
		},
	}, {
		name: "an unclosed quote and no name",
		form: Form{Namespace: "ns", Command: "sh -c 'echo"},
		want: []FieldError{
			{Field: "command", Message: "the command has an unclosed ' quote"},
			{Field: "name", Message: "a job needs a name"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SubmitForm(context.Background(), nil, tt.form, true)
			if diff := cmp.Diff(tt.want, got.Errors); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}

// A clone keeps what run gave the job: the Open MPI version asked for over
// the runtime's, the volumes of its runtime copy, and says what it drops.
func TestFormOfReadsBackWhatRunWrote(t *testing.T) {
	spec := Spec{Name: "pi", Namespace: "ns", Runtime: "torus-openmpi", Implementation: mpi.Implementation("OpenMPI5"),
		Workers: ptr.To[int32](4), Command: []string{"mpirun", "-n", "8", "python3", "train.py --lr 0.1"}}
	tj := BuildTrainJob(spec)
	tj.Labels = map[string]string{api.LabelImplementation: "OpenMPI5"}
	tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "t"}}}}
	rt := wrappers.MakeMPIRuntime("torus-openmpi", "OpenMPI").Namespaced("ns")
	mountInCopy(&rt.Spec, []Volume{{Claim: "data", MountPath: "/data", ReadOnly: true}, {Claim: "out", MountPath: "/out"}})
	tj.Annotations[api.AnnotationRuntimeCopyOf] = "ClusterTrainingRuntime/torus-openmpi"
	f, notes := FormOf(tj, rt)
	want := Form{Namespace: "ns", Runtime: "torus-openmpi", MPI: "openmpi5", Workers: "4",
		Command: "mpirun -n 8 python3 'train.py --lr 0.1'", Env: []string{"A=1"}, Volumes: []string{"pvc:data:/data:ro", "pvc:out:/out"}}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("form (-want,+got):\n%s", diff)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "TOKEN") {
		t.Errorf("notes = %q, want one naming TOKEN", notes)
	}
}

// A clone keeps the volumes, pull secrets and service account of the
// runtime patch run wrote, and says it drops other managers' patches.
func TestFormOfReadsBackTheRunsPatch(t *testing.T) {
	spec := Spec{Name: "pi", Namespace: "ns", Runtime: "torus-openmpi", Volumes: []Volume{{Claim: "data", MountPath: "/data", ReadOnly: true}, {Claim: "out", MountPath: "/out"}},
		ImagePullSecrets: []string{"registry", "mirror"}, ServiceAccount: "trainer"}
	tj := BuildTrainJob(spec)
	tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, trainer.RuntimePatch{Manager: mpi.KueueManager}, trainer.RuntimePatch{Manager: "example.com/tuner"})
	f, notes := FormOf(tj, nil)
	want := Form{Namespace: "ns", Runtime: "torus-openmpi", Volumes: []string{"pvc:data:/data:ro", "pvc:out:/out"},
		ImagePullSecrets: []string{"registry", "mirror"}, ServiceAccount: "trainer"}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("form (-want,+got):\n%s", diff)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "example.com/tuner") {
		t.Errorf("notes = %q, want one naming example.com/tuner", notes)
	}
}
