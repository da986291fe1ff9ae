package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/torus-mpi/torus/operator/controller"
)

// ProofKeySecret holds the keys of the stamps by which the operator
// recognises the children it made (the JobSets, SSH Secrets and
// NetworkPolicies of MPI jobs), in the operator's namespace: every replica
// and every restart reads the same keys. Its field "key" signs; fields
// named "retired-..." hold earlier keys, which still verify. Children made
// under a retired or lost key are stamped again under the current one.
const ProofKeySecret = "torus-operator-proof-key"

const (
	proofKeyField     = "key"
	retiredKeyPrefix  = "retired-"
	minProofKeyLength = 32
)

// loadProofKeys reads the proof keys from ns, making the current one on the
// first start; of replicas starting together, the first to create it wins
// and the others read it.
func loadProofKeys(ctx context.Context, c client.Client, r client.Reader, ns string) (controller.ProofKeys, error) {
	key := client.ObjectKey{Namespace: ns, Name: ProofKeySecret}
	var s corev1.Secret
	err := r.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		data := make([]byte, minProofKeyLength)
		if _, err := rand.Read(data); err != nil {
			return controller.ProofKeys{}, fmt.Errorf("making a proof key: %w", err)
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ProofKeySecret, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "torus-operator"}},
			Immutable:  ptr.To(true),
			Data:       map[string][]byte{proofKeyField: data},
		}
		switch err = c.Create(ctx, &s); {
		case err == nil:
			return proofKeysOf(&s)
		case apierrors.IsAlreadyExists(err):
			err = r.Get(ctx, key, &s)
		}
	}
	if err != nil {
		return controller.ProofKeys{}, fmt.Errorf("reading the operator's proof key (Secret %s/%s): %w", ns, ProofKeySecret, err)
	}
	return proofKeysOf(&s)
}

// proofKeysOf reads the keys a proof-key Secret holds.
func proofKeysOf(s *corev1.Secret) (controller.ProofKeys, error) {
	keys := controller.ProofKeys{Current: s.Data[proofKeyField], Since: s.CreationTimestamp.Time}
	if len(keys.Current) < minProofKeyLength {
		return controller.ProofKeys{}, fmt.Errorf("secret %s/%s holds no proof key of %d bytes or more in %q: delete it and the operator makes a new one, or add one (docs/admins/security.md, rotating the proof key)",
			s.Namespace, s.Name, minProofKeyLength, proofKeyField)
	}
	for _, field := range slices.Sorted(maps.Keys(s.Data)) {
		if !strings.HasPrefix(field, retiredKeyPrefix) {
			continue
		}
		if len(s.Data[field]) < minProofKeyLength {
			return controller.ProofKeys{}, fmt.Errorf("secret %s/%s: retired proof key %q is shorter than %d bytes: remove it, or put back the key it was", s.Namespace, s.Name, field, minProofKeyLength)
		}
		keys.Retired = append(keys.Retired, s.Data[field])
	}
	return keys, nil
}
