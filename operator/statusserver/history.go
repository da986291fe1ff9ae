package statusserver

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/pkg/trainerstatus"
)

// The histories live in the jobs' namespaces, beside the jobs.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update

// recordHistory adds a written report's numeric metrics to the job's
// history, a ConfigMap the job controls, made on the job's first such
// report and deleted with the job. Each replica of the operator writes
// the reports it took: an update names the version it read and, when
// another replica's came first, reads again, so both keep their points.
func (s *Server) recordHistory(ctx context.Context, tj *trainer.TrainJob, st *trainer.TrainerStatus) error {
	var point trainerstatus.History
	point.Add(st.LastUpdatedTime.Time, st.Metrics)
	if len(point.Series) == 0 {
		return nil
	}
	key := client.ObjectKey{Namespace: tj.Namespace, Name: trainerstatus.HistoryName(tj.Name)}
	owner := metav1.NewControllerRef(tj, schema.GroupVersionKind{Group: trainer.GroupVersion.Group, Version: trainer.GroupVersion.Version, Kind: trainer.TrainJobKind})
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := s.api.Get(ctx, key, &cm)
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, OwnerReferences: []metav1.OwnerReference{*owner}},
				Data:       map[string]string{trainerstatus.HistoryKey: point.Encode()},
			}
			err = s.client.Create(ctx, &cm, client.FieldOwner(FieldManager))
			if apierrors.IsAlreadyExists(err) {
				// Another replica made it first: read it and add to it.
				return apierrors.NewConflict(corev1.Resource("configmaps"), key.Name, err)
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("reading ConfigMap %s: %w", key, err)
		}
		if !metav1.IsControlledBy(&cm, tj) {
			// A ConfigMap of that name that is not the job's own is the
			// user's: Torus neither reads nor replaces it.
			return fmt.Errorf("ConfigMap %s is not controlled by TrainJob %s, so it holds no metrics history: rename it to chart the job's metrics", key, tj.Name)
		}
		h, err := trainerstatus.ParseHistory(cm.Data[trainerstatus.HistoryKey])
		if err != nil {
			s.log.Info("Starting a job's metrics history again", "configMap", key, "reason", err.Error())
		}
		h.Add(st.LastUpdatedTime.Time, st.Metrics)
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[trainerstatus.HistoryKey] = h.Encode()
		return s.client.Update(ctx, &cm, client.FieldOwner(FieldManager))
	})
}
