package controller

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
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
//
// The key may be rotated or lost (its namespace deleted and the operator
// installed again): children made under an earlier key are stamped again
// with the current one (reprove), so that no running job is stranded.
type proofs struct {
	// keys[0] signs; every key verifies. The others are retired keys,
	// kept until the children stamped with them are stamped again.
	keys [][]byte
	// since is when keys[0] was made: a stamped child older than that,
	// which no key verifies, was stamped under a key since lost.
	since time.Time
}

// ProofKeys are the keys of the stamps by which Torus recognises the
// children it made (proofs).
type ProofKeys struct {
	// Current signs every stamp Torus writes.
	Current []byte
	// Retired verify the stamps made before Current replaced them.
	Retired [][]byte
	// Since is when Current was made.
	Since time.Time
}

func newProofs(k ProofKeys) proofs {
	return proofs{keys: append([][]byte{k.Current}, k.Retired...), since: k.Since}
}

// sign is the stamp of a child of tj under the current key; run is the
// child's api.AnnotationJobSetRestarts ("" for children made once per job).
func (p proofs) sign(kind string, child metav1.Object, tj *trainer.TrainJob, run string, data ...[]byte) string {
	return signWith(p.keys[0], kind, child, tj, run, data...)
}

func signWith(key []byte, kind string, child metav1.Object, tj *trainer.TrainJob, run string, data ...[]byte) string {
	mac := hmac.New(sha256.New, key)
	for _, part := range []string{kind, child.GetNamespace(), child.GetName(), string(tj.UID), run} {
		mac.Write([]byte(part))
		mac.Write([]byte{0})
	}
	for _, d := range data {
		mac.Write(d)
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verifiedBy is the index of the key a stamp verifies under, or -1.
func (p proofs) verifiedBy(stamp, kind string, child metav1.Object, tj *trainer.TrainJob, run string, data ...[]byte) int {
	for i, key := range p.keys {
		if hmac.Equal([]byte(stamp), []byte(signWith(key, kind, child, tj, run, data...))) {
			return i
		}
	}
	return -1
}

// dataDigest is a Secret's data, key by key in order, as one SHA-256 sum.
func dataDigest(data map[string][]byte) []byte {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(data[k])
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// stampData records on a Secret Torus is about to create that Torus made
// its data (api.AnnotationProofData).
func (p proofs) stampData(kind string, s *corev1.Secret, tj *trainer.TrainJob) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[api.AnnotationProofData] = p.sign(kind, s, tj, s.Annotations[api.AnnotationJobSetRestarts], dataDigest(s.Data))
}

// dataProof says whether a Secret read whole from the API server holds the
// data Torus made for tj: dataMade, dataUnstamped (no stamp of its data,
// as made by an operator that stamped names alone), or dataForged (a stamp
// that does not fit the data).
func (p proofs) dataProof(kind string, s *corev1.Secret, tj *trainer.TrainJob) dataProof {
	got, ok := s.Annotations[api.AnnotationProofData]
	switch {
	case !ok:
		return dataUnstamped
	case p.made(kind, s, tj) && p.verifiedBy(got, kind, s, tj, s.Annotations[api.AnnotationJobSetRestarts], dataDigest(s.Data)) >= 0:
		return dataMade
	}
	return dataForged
}

type dataProof int

const (
	dataMade dataProof = iota
	dataUnstamped
	dataForged
)

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
// stamp verifies under the current key or a retired one.
func (p proofs) made(kind string, child metav1.Object, tj *trainer.TrainJob) bool {
	return p.judge(kind, child, tj) <= provenRetired
}

// provenance is what a child's stamp says of who made it.
type provenance int

const (
	// provenCurrent: stamped under the current key.
	provenCurrent provenance = iota
	// provenRetired: stamped under a retired key.
	provenRetired
	// stampedBefore: stamped, controlled by the job and older than the
	// current key, but no key verifies the stamp: made under a key since
	// lost, or a stamp copied by someone before the key was made.
	stampedBefore
	// unproven: not a child Torus made for the job.
	unproven
)

// judge tells how child came to be a child of tj.
func (p proofs) judge(kind string, child metav1.Object, tj *trainer.TrainJob) provenance {
	if !metav1.IsControlledBy(child, tj) {
		return unproven
	}
	a := child.GetAnnotations()
	got, ok := a[api.AnnotationProof]
	if !ok {
		return unproven
	}
	switch i := p.verifiedBy(got, kind, child, tj, a[api.AnnotationJobSetRestarts]); {
	case i == 0:
		return provenCurrent
	case i > 0:
		return provenRetired
	case child.GetCreationTimestamp().Time.Before(p.since.Truncate(time.Second)):
		// Creation times have whole seconds: a child of the same second
		// as the key may be younger than it.
		return stampedBefore
	}
	return unproven
}
