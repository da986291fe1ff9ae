// Package trainerstatus holds what a training program and Torus agree on to
// report a TrainJob's progress: Kubeflow Trainer's TrainJob status API
// (status.trainerStatus, alpha since Trainer v2.2, as v2.3.0 serves it). A
// program POSTs an UpdateTrainJobStatusRequest to the URL in
// KUBEFLOW_TRAINER_SERVER_URL, with the projected ServiceAccount token in
// KUBEFLOW_TRAINER_SERVER_TOKEN, verifying the server with the CA in
// KUBEFLOW_TRAINER_SERVER_CA_CERT: the same names, paths, audience and
// request as upstream's, so that a program written for upstream reports
// unchanged on Torus.
package trainerstatus

import (
	"fmt"
	"slices"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// The program's environment, as upstream's TrainJobStatus plugin sets it.
const (
	EnvServerURL = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvCACert    = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvToken     = "KUBEFLOW_TRAINER_SERVER_TOKEN"
)

// The files the program reads, from one projected volume.
const (
	Volume    = "kubeflow-trainer-token"
	MountPath = "/var/run/secrets/kubeflow/trainer"
	TokenFile = "token"
	CAFile    = "ca.crt"
	// TokenExpirationSeconds is the token's lifetime; the kubelet renews
	// it at 80 % of that.
	TokenExpirationSeconds = 3600
)

// AnnotationCA holds, on each pod, the CA that signs the status server's
// certificate, which the downward API projects as CAFile: no object of its
// own per job.
const AnnotationCA = api.Domain + "status-server-ca"

// MaxCA bounds the CA bundle a pod carries.
const MaxCA = 16 << 10

// Bounds of a report, as the TrainJob API validates them, and of its body.
const (
	MaxBody        = 64 << 10
	MaxMetrics     = 256
	MaxMetricName  = 64
	MaxMetricValue = 64
)

// Path is the endpoint of a job's reports, below the server's URL.
func Path(namespace, name string) string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/trainjobs/%s/status", trainer.GroupVersion.Group, trainer.GroupVersion.Version, namespace, name)
}

// Pattern is Path as a net/http pattern, with the namespace and name as
// wildcards of those names.
var Pattern = "POST " + Path("{namespace}", "{name}")

// Audience is the audience of a job's tokens: a token for one job is
// refused for every other.
func Audience(namespace, name string) string {
	return fmt.Sprintf("%s/%s/namespaces/%s/trainjobs/%s/status", trainer.GroupVersion.Group, trainer.GroupVersion.Version, namespace, name)
}

// Server is where the pods reach the status server.
type Server struct {
	// URL is the server's base, https://host[:port], without a path.
	URL string
	// CA is the PEM bundle that verifies the server's certificate.
	CA string
}

// Env is the program's environment for job namespace/name.
func (s *Server) Env(namespace, name string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvServerURL, Value: strings.TrimSuffix(s.URL, "/") + Path(namespace, name)},
		{Name: EnvCACert, Value: MountPath + "/" + CAFile},
		{Name: EnvToken, Value: MountPath + "/" + TokenFile},
	}
}

// EnvNames are the variables Env sets, which the launcher forwards to the
// ranks.
func EnvNames() []string { return []string{EnvServerURL, EnvCACert, EnvToken} }

// Apply wires a pod of job namespace/name to the server: the projected
// token for the job's audience and the CA in one read-only volume, and the
// environment on ctr. A variable the container sets itself is kept.
func (s *Server) Apply(pod *corev1.PodTemplateSpec, ctr *corev1.Container, namespace, name string) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationCA] = s.CA
	pod.Spec.Volumes = mpi.UpsertVolume(pod.Spec.Volumes, volume(namespace, name))
	ctr.VolumeMounts = mpi.UpsertMount(ctr.VolumeMounts, mount)
	for _, e := range s.Env(namespace, name) {
		if !slices.ContainsFunc(ctr.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name }) {
			ctr.Env = append(ctr.Env, e)
		}
	}
}

// volume is the pod's projected volume: the token for job namespace/name's
// audience and the CA, from the pod's annotation AnnotationCA.
func volume(namespace, name string) corev1.Volume {
	return corev1.Volume{
		Name: Volume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o444),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: Audience(namespace, name), ExpirationSeconds: ptr.To[int64](TokenExpirationSeconds), Path: TokenFile,
				}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
					Path: CAFile, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationCA + "']"},
				}}}},
			},
		}},
	}
}

// mount is where every container reads volume.
var mount = corev1.VolumeMount{Name: Volume, MountPath: MountPath, ReadOnly: true}

// Validate says what is wrong with a report, in the API's terms, or "".
func Validate(st *trainer.TrainerStatus) string {
	if p := st.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
		return fmt.Sprintf("trainerStatus.progressPercentage must be between 0 and 100, got %d", *p)
	}
	if r := st.EstimatedRemainingSeconds; r != nil && *r < 0 {
		return fmt.Sprintf("trainerStatus.estimatedRemainingSeconds must not be negative, got %d", *r)
	}
	if len(st.Metrics) > MaxMetrics {
		return fmt.Sprintf("trainerStatus.metrics holds at most %d metrics, got %d", MaxMetrics, len(st.Metrics))
	}
	for i, m := range st.Metrics {
		if n := len(m.Name); n < 1 || n > MaxMetricName {
			return fmt.Sprintf("trainerStatus.metrics[%d].name must be 1 to %d characters, got %d", i, MaxMetricName, n)
		}
		if n := len(m.Value); n < 1 || n > MaxMetricValue {
			return fmt.Sprintf("trainerStatus.metrics[%d].value (metric %q) must be 1 to %d characters, got %d; send numbers as strings", i, m.Name, MaxMetricValue, n)
		}
	}
	return ""
}

// Of is the job's latest report, or nil.
func Of(tj *trainer.TrainJob) *trainer.TrainerStatus {
	if tj == nil {
		return nil
	}
	return tj.Status.TrainerStatus
}

// Left is the time left by the latest estimate, counted down from when it
// was reported; ok is false when the program gave none.
func Left(st *trainer.TrainerStatus, now time.Time) (left time.Duration, ok bool) {
	if st == nil || st.EstimatedRemainingSeconds == nil {
		return 0, false
	}
	left = time.Duration(*st.EstimatedRemainingSeconds) * time.Second
	if !st.LastUpdatedTime.IsZero() {
		left -= now.Sub(st.LastUpdatedTime.Time)
	}
	return max(left, 0), true
}

// Metrics renders up to n metrics as name=value, in the program's order,
// saying how many more there are.
func Metrics(metrics []trainer.Metric, n int) string {
	if len(metrics) == 0 {
		return ""
	}
	var parts []string
	for _, m := range metrics[:min(n, len(metrics))] {
		parts = append(parts, m.Name+"="+m.Value)
	}
	if more := len(metrics) - n; more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, ", ")
}
