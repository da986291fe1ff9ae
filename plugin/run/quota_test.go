package run

import (
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/pkg/mpi"
)

func runtimeWith(launcher, node corev1.ResourceRequirements) *mpi.Runtime {
	rj := func(name string, res corev1.ResourceRequirements) jobsetv1alpha2.ReplicatedJob {
		r := jobsetv1alpha2.ReplicatedJob{Name: name}
		r.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: mpi.TrainerContainer, Resources: res}}
		return r
	}
	rt := &mpi.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "rt"}
	rt.Spec.MLPolicy = &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj(mpi.LauncherJob, launcher), rj(mpi.NodeJob, node)}
	return rt
}

func list(kv ...string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		rl[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

func clusterQueue(cohort string, flavors ...kueue.FlavorQuotas) *kueue.ClusterQueue {
	cq := &kueue.ClusterQueue{}
	cq.Name = "cq"
	cq.Spec.CohortName = kueue.CohortReference(cohort)
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nvidia.com/gpu"},
		Flavors:          flavors,
	}}
	return cq
}

func flavor(name string, gpus, borrow string) kueue.FlavorQuotas {
	f := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(name), Resources: []kueue.ResourceQuota{
		{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("64")},
		{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("256Gi")},
		{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(gpus)},
	}}
	if borrow != "" {
		f.Resources[2].BorrowingLimit = ptr.To(resource.MustParse(borrow))
	}
	return f
}

func TestNeverFits(t *testing.T) {
	rt := runtimeWith(corev1.ResourceRequirements{Requests: list("cpu", "1")}, corev1.ResourceRequirements{})
	job := func(workers int32, res corev1.ResourceRequirements) []podSet {
		tj := BuildTrainJob(Spec{Name: "j", Workers: ptr.To(workers)})
		tj.Spec.Trainer.ResourcesPerNode = &res
		return podSets(tj, rt, &mpi.Job{Workers: workers})
	}
	gpus := func(n string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", n, "memory", "1Gi")}
	}
	cases := map[string]struct {
		cq   *kueue.ClusterQueue
		sets []podSet
		want string
	}{
		"fits":                      {cq: clusterQueue("", flavor("a", "8", "")), sets: job(2, gpus("4"))},
		"more GPUs than any flavor": {cq: clusterQueue("", flavor("a", "8", ""), flavor("b", "8", "")), sets: job(4, gpus("4")), want: `the workers need 16 nvidia.com/gpu (4 × 4) but the largest flavor of ClusterQueue "cq" offers 8`},
		"borrowing can make it fit": {cq: clusterQueue("pool", flavor("a", "8", "8")), sets: job(4, gpus("4"))},
		"unlimited borrowing":       {cq: clusterQueue("pool", flavor("a", "8", "")), sets: job(40, gpus("4"))},
		"borrowing is limited":      {cq: clusterQueue("pool", flavor("a", "8", "4")), sets: job(4, gpus("4")), want: "offers 12"},
		"a resource not covered": {
			cq:   clusterQueue("", flavor("a", "8", "")),
			sets: job(1, corev1.ResourceRequirements{Limits: list("example.com/fpga", "1")}),
			want: `the workers request example.com/fpga, which ClusterQueue "cq" does not cover`,
		},
		"launcher and workers together exceed the total": {
			cq:   clusterQueue("", flavor("a", "4", ""), flavor("b", "4", "")),
			sets: append(job(1, gpus("4")), podSet{Name: mpi.LauncherJob, Count: 1, Requests: list("nvidia.com/gpu", "4")}, podSet{Name: "extra", Count: 1, Requests: list("nvidia.com/gpu", "4")}),
			want: `the job needs 12 nvidia.com/gpu in all but ClusterQueue "cq" has 8`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := neverFits(tc.cq, tc.sets)
			if tc.want == "" && got != "" {
				t.Fatalf("NeverFits() = %q, want it to fit", got)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("NeverFits() = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

func TestPodSets(t *testing.T) {
	rt := runtimeWith(corev1.ResourceRequirements{Requests: list("cpu", "1")}, corev1.ResourceRequirements{Requests: list("cpu", "2")})
	tj := BuildTrainJob(Spec{Name: "j", Workers: ptr.To[int32](3), GPUs: ptr.To[int64](2)})
	sets := podSets(tj, rt, &mpi.Job{Workers: 3})
	if len(sets) != 2 {
		t.Fatalf("PodSets() = %v, want launcher and node", sets)
	}
	launcher, node := sets[0], sets[1]
	if launcher.Count != 1 || launcher.Requests.Cpu().String() != "1" {
		t.Errorf("launcher = %+v, want 1 pod with the runtime's 1 CPU", launcher)
	}
	if q := node.Requests["nvidia.com/gpu"]; node.Count != 3 || q.String() != "2" || !node.Requests.Cpu().IsZero() {
		t.Errorf("node = %+v, want 3 pods with resourcesPerNode (2 GPUs) replacing the runtime's", node)
	}
}

func corev1Requirements() corev1.ResourceRequirements { return corev1.ResourceRequirements{} }
