package trainerstatus

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
)

func TestValidate(t *testing.T) {
	metrics := func(n int) []trainer.Metric {
		out := make([]trainer.Metric, n)
		for i := range out {
			out[i] = trainer.Metric{Name: "m", Value: "1"}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		st   trainer.TrainerStatus
		want string
	}{
		{name: "a whole report", st: trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100), EstimatedRemainingSeconds: ptr.To[int32](0), Metrics: metrics(MaxMetrics)}},
		{name: "an empty report", st: trainer.TrainerStatus{}},
		{name: "progress above 100", st: trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](101)}, want: "progressPercentage must be between 0 and 100, got 101"},
		{name: "negative progress", st: trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](-1)}, want: "got -1"},
		{name: "negative time left", st: trainer.TrainerStatus{EstimatedRemainingSeconds: ptr.To[int32](-5)}, want: "estimatedRemainingSeconds must not be negative, got -5"},
		{name: "too many metrics", st: trainer.TrainerStatus{Metrics: metrics(MaxMetrics + 1)}, want: "at most 256 metrics, got 257"},
		{name: "a metric without a name", st: trainer.TrainerStatus{Metrics: []trainer.Metric{{Value: "1"}}}, want: "metrics[0].name must be 1 to 64 characters, got 0"},
		{name: "a value too long", st: trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "loss", Value: strings.Repeat("1", 65)}}}, want: `metrics[0].value (metric "loss") must be 1 to 64 characters, got 65`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Validate(&tc.st)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Validate: %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLeft(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := metav1.NewTime(now.Add(-time.Minute))
	for _, tc := range []struct {
		name   string
		st     *trainer.TrainerStatus
		want   time.Duration
		wantOK bool
	}{
		{name: "no report"},
		{name: "no estimate", st: &trainer.TrainerStatus{LastUpdatedTime: at}},
		{name: "counted down since the report", st: &trainer.TrainerStatus{EstimatedRemainingSeconds: ptr.To[int32](600), LastUpdatedTime: at}, want: 9 * time.Minute, wantOK: true},
		{name: "overdue: none left", st: &trainer.TrainerStatus{EstimatedRemainingSeconds: ptr.To[int32](30), LastUpdatedTime: at}, want: 0, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Left(tc.st, now)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Left = %v, %t; want %v, %t", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// A pod gets its job's token and the server's CA in one read-only volume,
// and the variables upstream's plugin names; a variable the program sets
// itself stays.
func TestApply(t *testing.T) {
	srv := &Server{URL: "https://torus-webhook.torus-system.svc:443/", CA: "-----BEGIN CERTIFICATE-----\n"}
	pod := &corev1.PodTemplateSpec{}
	ctr := &corev1.Container{Name: "node", Env: []corev1.EnvVar{{Name: EnvToken, Value: "/mine"}}}
	srv.Apply(pod, ctr, "team-a", "digits")
	srv.Apply(pod, ctr, "team-a", "digits") // idempotent

	if got := pod.Annotations[AnnotationCA]; got != srv.CA {
		t.Errorf("CA annotation %q", got)
	}
	wantEnv := []corev1.EnvVar{
		{Name: EnvToken, Value: "/mine"},
		{Name: EnvServerURL, Value: "https://torus-webhook.torus-system.svc:443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/digits/status"},
		{Name: EnvCACert, Value: "/var/run/secrets/kubeflow/trainer/ca.crt"},
	}
	if diff := cmp.Diff(wantEnv, ctr.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: Volume, MountPath: MountPath, ReadOnly: true}}, ctr.VolumeMounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if len(pod.Spec.Volumes) != 1 {
		t.Fatalf("volumes: %+v", pod.Spec.Volumes)
	}
	src := pod.Spec.Volumes[0].Projected.Sources
	if tok := src[0].ServiceAccountToken; tok == nil || tok.Audience != "trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/digits/status" || tok.Path != TokenFile {
		t.Errorf("token projection: %+v", src[0])
	}
	if d := src[1].DownwardAPI; d == nil || d.Items[0].Path != CAFile || d.Items[0].FieldRef.FieldPath != "metadata.annotations['torus-mpi.io/status-server-ca']" {
		t.Errorf("CA projection: %+v", src[1])
	}
}

// A pod template given as an apply configuration gets the variables, the
// mount and the projected volume on every container, and the CA as the
// pod's annotation; what the template sets itself stays.
func TestApplyTemplate(t *testing.T) {
	srv := &Server{URL: "https://torus.example:9443/", CA: "PEM"}
	pt := corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(
		corev1ac.Container().WithName("node").WithEnv(corev1ac.EnvVar().WithName(EnvToken).WithValue("/mine")),
		corev1ac.Container().WithName("sidecar"),
	))
	srv.ApplyTemplate(pt, "team", "job")
	srv.ApplyTemplate(pt, "team", "job") // a second apply adds nothing
	if got := pt.Annotations[AnnotationCA]; got != "PEM" {
		t.Errorf("CA annotation %q", got)
	}
	if n := len(pt.Spec.Volumes); n != 1 {
		t.Fatalf("%d volumes, want 1", n)
	}
	v := pt.Spec.Volumes[0]
	if got := *v.Projected.Sources[0].ServiceAccountToken.Audience; got != Audience("team", "job") {
		t.Errorf("token audience %q", got)
	}
	if f := v.Projected.Sources[1].DownwardAPI.Items[0]; *f.Path != CAFile || *f.FieldRef.FieldPath != "metadata.annotations['"+AnnotationCA+"']" {
		t.Errorf("CA file %s from %s", *f.Path, *f.FieldRef.FieldPath)
	}
	for _, c := range pt.Spec.Containers {
		env := map[string]string{}
		for _, e := range c.Env {
			if _, dup := env[*e.Name]; dup {
				t.Errorf("container %s: %s set twice", *c.Name, *e.Name)
			}
			env[*e.Name] = *e.Value
		}
		if got := env[EnvServerURL]; got != "https://torus.example:9443"+Path("team", "job") {
			t.Errorf("container %s: %s=%q", *c.Name, EnvServerURL, got)
		}
		if len(c.VolumeMounts) != 1 || *c.VolumeMounts[0].MountPath != MountPath {
			t.Errorf("container %s: mounts %v", *c.Name, c.VolumeMounts)
		}
	}
	if got := *pt.Spec.Containers[0].Env[0].Value; got != "/mine" {
		t.Errorf("the container's own %s became %q", EnvToken, got)
	}
}
