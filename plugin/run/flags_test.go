package run

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestFlagsSpec(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	cases := map[string]struct {
		flags     jobFlags
		changed   []string
		command   []string
		wantSpec  Spec
		wantError []string
	}{
		"only what was set": {
			flags:    jobFlags{Image: "img", Workers: 0, GPUs: 0},
			command:  []string{"mpirun", "./pi"},
			wantSpec: Spec{Name: "pi", Namespace: "ns", Image: "img", Command: []string{"mpirun", "./pi"}},
		},
		"counts, resources, mpi, runtime kind, env, volumes, pull secrets, service account": {
			flags: jobFlags{
				Image: "img", Workers: 4, SlotsPerWorker: 2, GPUs: 1, CPU: "500m", Memory: "2Gi", MPI: "Intel",
				Runtime: "TrainingRuntime/mine", Env: []string{"A=1", "B=x=y"}, Volumes: []string{"pvc:data:/data", "pvc:models:/models:ro"},
				ImagePullSecrets: []string{"registry", "mirror"}, ServiceAccount: "trainer",
			},
			changed: []string{flagWorkers, flagSlotsPerWorker, flagGPUs, flagCPU, flagMemory},
			wantSpec: Spec{
				Name: "pi", Namespace: "ns", Image: "img", Implementation: mpi.IntelMPI,
				Runtime: "mine", RuntimeKind: trainer.TrainingRuntimeKind,
				Workers: ptr.To[int32](4), SlotsPerWorker: ptr.To[int32](2), GPUs: ptr.To[int64](1),
				CPU: q("500m"), Memory: q("2Gi"),
				Env:              []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "x=y"}},
				Volumes:          []Volume{{Claim: "data", MountPath: "/data"}, {Claim: "models", MountPath: "/models", ReadOnly: true}},
				ImagePullSecrets: []string{"registry", "mirror"}, ServiceAccount: "trainer",
			},
		},
		"every mistake at once": {
			flags: jobFlags{
				Memory: "lots", MPI: "lam", Runtime: "Pod/x", Env: []string{"NOVALUE"}, Volumes: []string{"hostPath:/x:/y"},
				Workers: -1, GPUResource: "gpu", ImagePullSecrets: []string{"Registry", "pi-mpi-ssh", "pi-mpi-ssh"}, ServiceAccount: "robot_1",
			},
			changed: []string{flagMemory, flagWorkers},
			wantError: []string{
				`--memory="lots" is not a quantity`,
				`--mpi: unknown MPI implementation "lam"`,
				`--runtime "Pod/x": write NAME for a ClusterTrainingRuntime or TrainingRuntime/NAME`,
				`--env "NOVALUE": write it as NAME=VALUE`,
				`--volume "hostPath:/x:/y": write it as pvc:CLAIM:/mount/path`,
				"--workers=-1: a job needs at least 1 worker",
				`--gpu-resource="gpu": name an extended resource`,
				`--image-pull-secret "Registry" is not a Secret name: a lowercase RFC 1123 subdomain`,
				`--image-pull-secret "pi-mpi-ssh": Secrets named *-mpi-ssh hold MPI jobs' SSH keys, which only their own pods receive`,
				"--image-pull-secret pi-mpi-ssh is given twice",
				`--service-account "robot_1" is not a ServiceAccount name: a lowercase RFC 1123 subdomain`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			changed := func(f string) bool {
				for _, c := range tc.changed {
					if c == f {
						return true
					}
				}
				return false
			}
			spec, err := tc.flags.Spec("pi", "ns", tc.command, changed)
			if len(tc.wantError) > 0 {
				if err == nil {
					t.Fatalf("Spec() succeeded, want errors %q", tc.wantError)
				}
				for _, want := range tc.wantError {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Spec() error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Spec() = %v", err)
			}
			if diff := cmp.Diff(tc.wantSpec, spec); diff != "" {
				t.Errorf("spec (-want,+got):\n%s", diff)
			}
		})
	}
}
