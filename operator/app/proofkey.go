package app

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProofKeySecret holds the key of the stamps by which the operator
// recognises the children it made (the JobSets, SSH Secrets and
// NetworkPolicies of MPI jobs), in the operator's namespace: every replica
// and every restart reads the same key. Deleting it makes the operator
// disown the children of running jobs.
const ProofKeySecret = "torus-operator-proof-key"

const proofKeyField = "key"

// loadProofKey reads the proof key from ns, making it on the first start;
// of replicas starting together, the first to create it wins and the
// others read it.
func loadProofKey(ctx context.Context, c client.Client, r client.Reader, ns string) ([]byte, error) {
	key := client.ObjectKey{Namespace: ns, Name: ProofKeySecret}
	var s corev1.Secret
	err := r.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		data := make([]byte, 32)
		if _, err := rand.Read(data); err != nil {
			return nil, fmt.Errorf("making a proof key: %w", err)
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ProofKeySecret, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "torus-operator"}},
			Immutable:  ptr.To(true),
			Data:       map[string][]byte{proofKeyField: data},
		}
		switch err = c.Create(ctx, &s); {
		case err == nil:
			return data, nil
		case apierrors.IsAlreadyExists(err):
			err = r.Get(ctx, key, &s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the operator's proof key (Secret %s/%s): %w", ns, ProofKeySecret, err)
	}
	if len(s.Data[proofKeyField]) < 32 {
		return nil, fmt.Errorf("secret %s/%s holds no proof key of 32 bytes or more in %q: delete it and the operator makes a new one (the children of running jobs are then no longer recognised)", ns, ProofKeySecret, proofKeyField)
	}
	return s.Data[proofKeyField], nil
}
