package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/torus-mpi/torus/pkg/scheme"
)

func TestDoctor(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	kube := fake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{
		{GroupVersion: "trainer.kubeflow.org/v1alpha1"},
		{GroupVersion: "jobset.x-k8s.io/v1alpha2"},
		{GroupVersion: "kueue.x-k8s.io/v1beta2"},
	}
	gpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}
	cpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	c := ctrlfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: "torus-system"}, Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("torus-0"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-3 * time.Second))),
		}},
		&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torus-openmpi"}, Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "ns"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "cq"}},
		gpuNode, cpuNode,
	).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if ssar, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
				// May do everything but exec.
				ssar.Status.Allowed = ssar.Spec.ResourceAttributes.Subresource != "exec"
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()

	d := &doctor{Client: c, Discovery: kube.Discovery(), Namespace: "ns", Now: func() time.Time { return now }}
	got := map[string]status{}
	msgs := map[string]string{}
	var order []string
	for _, r := range d.Run(context.Background()) {
		order = append(order, r.Check)
		got[r.Check] = r.Status
		msgs[r.Check] = r.Message
		if r.Status != pass && r.Fix == "" {
			t.Errorf("%s: %s without a fix", r.Check, r.Status)
		}
	}
	want := map[string]status{
		"API server": pass, "Trainer CRDs": pass, "Torus CRDs": warn, "JobSet": pass, "Kueue": pass,
		"Torus operator": pass,
		// The fake API server has no webhooks: a TrainJob for a missing
		// runtime goes through.
		"Torus webhooks":   fail,
		"MPI runtimes":     warn,
		"Permissions":      warn,
		"Kueue queues":     pass,
		"Network profiles": warn,
		"GPUs":             pass,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want,+got):\n%s", diff)
	}
	// Without the operator nothing else matters: it is the first of
	// Torus's own checks, right after the API server and the APIs.
	wantOrder := []string{"API server", "Trainer CRDs", "Torus CRDs", "JobSet", "Kueue", "Torus operator", "Torus webhooks"}
	if diff := cmp.Diff(wantOrder, order[:min(len(order), len(wantOrder))]); diff != "" {
		t.Errorf("order of the checks (-want,+got):\n%s", diff)
	}
	for check, want := range map[string]string{
		"Torus operator": "running: torus-0 leads (lease torus-system/torus-operator.torus-mpi.io renewed 3s ago)",
		"MPI runtimes":   "missing torus-openmpi5 (--mpi openmpi5), torus-intelmpi (--mpi intel), torus-mpich (--mpi mpich)",
		"Permissions":    "in namespace ns you may not create pods/exec (kubectl mpi exec-rank)",
		"Kueue queues":   "use --queue with team (ClusterQueue cq)",
		"GPUs":           "8 nvidia.com/gpu allocatable on 1 of 2 nodes: n1 (8 nvidia.com/gpu)",
	} {
		if msgs[check] != want {
			t.Errorf("%s: %q, want %q", check, msgs[check], want)
		}
	}

	// A lease nobody renews: the operator is down.
	d.Now = func() time.Time { return now.Add(time.Hour) }
	wantStale := result{Check: "Torus operator", Status: fail,
		Message: "the Torus operator is not running (last lease renewal 60m ago in namespace torus-system)",
		Fix:     "check its pods and logs: kubectl -n torus-system get pods -l app.kubernetes.io/name=torus; kubectl -n torus-system logs deploy/torus-operator --previous"}
	if diff := cmp.Diff(wantStale, d.operator(context.Background())); diff != "" {
		t.Errorf("stale lease (-want,+got):\n%s", diff)
	}
}

// The GPU check names each node's GPUs, and the nodes that have GPUs no
// device plugin serves.
func TestDoctorGPUs(t *testing.T) {
	node := func(name string, labels map[string]string, capacity, allocatable string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if capacity != "" {
			n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(capacity)}
			n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(allocatable)}
		}
		return n
	}
	cases := map[string]struct {
		nodes   []client.Object
		status  status
		message string
	}{
		"none": {nodes: []client.Object{node("cpu", nil, "", "")}, status: warn, message: "no node of 1 offers GPUs: --gpus jobs will not schedule"},
		"served": {nodes: []client.Object{node("b", nil, "4", "4"), node("a", nil, "8", "8"), node("cpu", nil, "", "")}, status: pass,
			message: "12 nvidia.com/gpu allocatable on 2 of 3 nodes: a (8 nvidia.com/gpu), b (4 nvidia.com/gpu)"},
		"a GPU node without its device plugin": {nodes: []client.Object{node("a", nil, "8", "8"), node("bare", map[string]string{"nvidia.com/gpu.present": "true"}, "", "")}, status: warn,
			message: "8 nvidia.com/gpu allocatable on 1 of 2 nodes: a (8 nvidia.com/gpu); bare labelled as having GPUs but offering none: no device plugin serves them"},
		"only GPUs no plugin serves": {nodes: []client.Object{node("bare", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}, "", "")}, status: warn,
			message: "no node of 1 offers GPUs; bare labelled as having GPUs but offering none: no device plugin serves them"},
		"GPUs the plugin reports unhealthy": {nodes: []client.Object{node("sick", nil, "8", "0")}, status: warn,
			message: "no node of 1 offers GPUs; sick having GPUs but none allocatable: the device plugin reports them unhealthy"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &doctor{Client: ctrlfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.nodes...).Build()}
			r := d.gpus(context.Background())
			if r.Status != tc.status || r.Message != tc.message {
				t.Errorf("%s: %q; want %s: %q", r.Status, r.Message, tc.status, tc.message)
			}
			if r.Status != pass && r.Fix == "" {
				t.Error("no fix")
			}
		})
	}
}

// --checkpoint-volume makes admission's check of the claim, and says when
// the pods would wait for it.
func TestDoctorCheckpointVolume(t *testing.T) {
	claim := func(name string, phase corev1.PersistentVolumeClaimPhase, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	c := ctrlfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		claim("shared", corev1.ClaimBound, corev1.ReadWriteMany),
		claim("waiting", corev1.ClaimPending, corev1.ReadWriteMany),
		claim("one-node", corev1.ClaimBound, corev1.ReadWriteOnce),
	).Build()
	cases := []struct {
		value  string
		want   status
		saying string
	}{
		{"shared:/data/ckpt", pass, "PersistentVolumeClaim shared is ReadWriteMany: every rank of a job in ns finds it at /data/ckpt ($TORUS_CHECKPOINT_DIR)"},
		{"waiting", warn, "PersistentVolumeClaim waiting is ReadWriteMany but Pending: a job's pods wait until it is bound"},
		{"one-node", fail, "PersistentVolumeClaim one-node cannot be shared by the job's pods: its access modes are [ReadWriteOnce]"},
		{"absent", fail, "PersistentVolumeClaim absent does not exist in the job's namespace"},
		{"other/shared", fail, `--checkpoint-volume "other/shared": a pod mounts claims of its own namespace only, not of other`},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			r := (&doctor{Client: c, Namespace: "ns", Checkpoint: tc.value}).checkpointVolume(context.Background())
			if r.Status != tc.want || !strings.HasPrefix(r.Message, tc.saying) || (r.Status != pass && r.Fix == "") {
				t.Errorf("%s: %s (fix %q), want %s: %s", r.Status, r.Message, r.Fix, tc.want, tc.saying)
			}
		})
	}
}
