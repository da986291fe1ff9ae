package controller

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
)

// proofs tell the children Torus made from objects that only look like
// them. A child's name, labels, annotations and owner references are
// written by whoever creates it, and anyone who may create Secrets in a
// namespace may create one named as a job's keys, controlled (on paper) by
// the job, before Torus does: while the job waits in a queue, while it is
// suspended, between two runs. Torus therefore stamps each child it creates
// with a keyed hash (HMAC-SHA256, a key only the operator holds) of the
// child's kind, namespace and name, its TrainJob's UID and, for keys, the
// run they were made for (api.AnnotationProof), and uses, updates or deletes
// only children whose stamp it can verify.
type proofs struct {
	key []byte
}

// sign is the stamp of a child of tj; run is the child's
// api.AnnotationJobSetRestarts ("" for children made once per job).
func (p proofs) sign(kind string, child metav1.Object, tj *trainer.TrainJob, run string) string {
	mac := hmac.New(sha256.New, p.key)
	for _, part := range []string{kind, child.GetNamespace(), child.GetName(), string(tj.UID), run} {
		mac.Write([]byte(part))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// stamp records on a child Torus is about to create that Torus made it.
func (p proofs) stamp(kind string, child metav1.Object, tj *trainer.TrainJob) {
	a := child.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[api.AnnotationProof] = p.sign(kind, child, tj, a[api.AnnotationJobSetRestarts])
	child.SetAnnotations(a)
}

// made reports whether Torus made child for tj: tj controls it and its
// stamp verifies.
func (p proofs) made(kind string, child metav1.Object, tj *trainer.TrainJob) bool {
	if !metav1.IsControlledBy(child, tj) {
		return false
	}
	a := child.GetAnnotations()
	got, ok := a[api.AnnotationProof]
	if !ok {
		return false
	}
	return hmac.Equal([]byte(got), []byte(p.sign(kind, child, tj, a[api.AnnotationJobSetRestarts])))
}
