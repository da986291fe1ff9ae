package main

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

func TestParseSizes(t *testing.T) {
	cases := []struct {
		in      string
		want    []int32
		wantErr bool
	}{
		{in: "1024,4096, 16384", want: []int32{1024, 4096, 16384}},
		{in: "8", want: []int32{8}},
		{in: "0", wantErr: true},
		{in: "16385", wantErr: true},
		{in: "1k", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range cases {
		got, err := parseSizes(tc.in)
		if (err != nil) != tc.wantErr || len(got) != len(tc.want) {
			t.Errorf("parseSizes(%q) = %v, %v", tc.in, got, err)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("parseSizes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

func TestParseMany(t *testing.T) {
	cases := []struct {
		in      string
		want    manyOptions
		wantErr bool
	}{
		{in: "1000x8", want: manyOptions{jobs: 1000, workers: 8}},
		{in: " 1x1 ", want: manyOptions{jobs: 1, workers: 1}},
		{in: "1000", wantErr: true},
		{in: "0x8", wantErr: true},
		{in: "10001x1", wantErr: true},
		{in: "8x16385", wantErr: true},
		{in: "1000*8", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range cases {
		got, err := parseMany(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseMany(%q) = %+v, %v; want %+v (error: %t)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// The floor is Torus's JobSet as a user would create it: queued, suspended
// for Kueue, with nothing that ties it to Torus's caches or gates, and its
// pods otherwise unchanged.
func TestFloorOf(t *testing.T) {
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{api.LabelJobName: "big", api.LabelRole: api.RoleWorker, "app": "train"},
			Annotations: map[string]string{"torus-mpi.io/kwok-run-duration": "1h", "kueue.x-k8s.io/workload": "jobset-big-0ace3"},
		},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: api.SchedulingGateSSHKeys}},
			Containers:      []corev1.Container{{Name: mpi.TrainerContainer, Image: "mpi:1"}},
		},
	}
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "bench", Labels: map[string]string{api.LabelJobName: "big"}},
		Spec: jobsetv1alpha2.JobSetSpec{
			Suspend: ptr.To(false),
			Network: &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(true), Subdomain: "big"},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: mpi.NodeJob, Replicas: 1,
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{api.LabelJobName: "big"}},
					Spec:       batchv1.JobSpec{Parallelism: ptr.To[int32](4), Template: pod},
				},
			}},
		},
	}
	floor := floorOf(js, "floor-4")
	if floor.Name != "floor-4" || floor.Namespace != "bench" || floor.Labels[mpi.KueueQueueLabel] != "bench" || floor.Labels[api.LabelJobName] != "" {
		t.Errorf("floor's metadata: %+v", floor.ObjectMeta)
	}
	if floor.Spec.Network.Subdomain != "floor-4" || js.Spec.Network.Subdomain != "big" {
		t.Errorf("the floor's subdomain is %q, not its own name (Torus's job's: %q)", floor.Spec.Network.Subdomain, js.Spec.Network.Subdomain)
	}
	if !ptr.Deref(floor.Spec.Suspend, false) {
		t.Error("the floor is not created suspended for Kueue")
	}
	rj := floor.Spec.ReplicatedJobs[0]
	got := rj.Template.Spec.Template
	if _, ok := got.Labels[api.LabelJobName]; ok {
		t.Errorf("the floor's pods carry Torus's job label: %v", got.Labels)
	}
	if _, ok := rj.Template.Labels[api.LabelJobName]; ok {
		t.Errorf("the floor's Jobs carry Torus's job label: %v", rj.Template.Labels)
	}
	if got.Labels[api.LabelRole] != api.RoleWorker || got.Labels["app"] != "train" || got.Annotations["torus-mpi.io/kwok-run-duration"] != "1h" {
		t.Errorf("the floor's pods lost what is not Torus's: %v %v", got.Labels, got.Annotations)
	}
	if _, ok := got.Annotations["kueue.x-k8s.io/workload"]; ok {
		t.Errorf("the floor's pods name Torus's job's workload: %v", got.Annotations)
	}
	if len(got.Spec.SchedulingGates) != 0 {
		t.Errorf("the floor's pods are gated: %v", got.Spec.SchedulingGates)
	}
	if *rj.Template.Spec.Parallelism != 4 || got.Spec.Containers[0].Image != "mpi:1" {
		t.Errorf("the floor's pods changed: %+v", rj.Template.Spec)
	}
	// Torus's JobSet is untouched.
	if len(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.SchedulingGates) != 1 || ptr.Deref(js.Spec.Suspend, true) {
		t.Error("floorOf changed the JobSet it copies")
	}
}
