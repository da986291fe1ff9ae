package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/operator/children"
)

var (
	keySince   = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	testProofs = newProofs(ProofKeys{Current: []byte("a key only the operator holds"), Since: keySince})
)

func TestProofs(t *testing.T) {
	tj := trainJob("pi", "uid-1")
	keys := func(run string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: "pi-mpi-ssh", Namespace: "ns", Annotations: map[string]string{api.AnnotationJobSetRestarts: run},
			OwnerReferences: []metav1.OwnerReference{children.OwnerReference(tj)},
		}}
	}
	made := keys("0")
	testProofs.stamp(childSecret, made, tj)
	copied := func(change func(*corev1.Secret)) *corev1.Secret {
		s := made.DeepCopy()
		change(s)
		return s
	}
	tests := map[string]struct {
		child  *corev1.Secret
		proofs proofs
		kind   string
		want   bool
	}{
		"made by Torus":    {child: made, proofs: testProofs, kind: childSecret, want: true},
		"no proof":         {child: keys("0"), proofs: testProofs, kind: childSecret},
		"another key":      {child: made, proofs: newProofs(ProofKeys{Current: []byte("another operator's")}), kind: childSecret},
		"a retired key":    {child: made, proofs: newProofs(ProofKeys{Current: []byte("the next key"), Retired: [][]byte{[]byte("a key only the operator holds")}}), kind: childSecret, want: true},
		"another kind":     {child: made, proofs: testProofs, kind: childNetworkPolicy},
		"another run":      {child: copied(func(s *corev1.Secret) { s.Annotations[api.AnnotationJobSetRestarts] = "1" }), proofs: testProofs, kind: childSecret},
		"another name":     {child: copied(func(s *corev1.Secret) { s.Name = "pi2-mpi-ssh" }), proofs: testProofs, kind: childSecret},
		"not controlled":   {child: copied(func(s *corev1.Secret) { s.OwnerReferences = nil }), proofs: testProofs, kind: childSecret},
		"a namesake job's": {child: copied(func(s *corev1.Secret) { s.OwnerReferences[0].UID = "uid-2" }), proofs: testProofs, kind: childSecret},
		"a tampered proof": {child: copied(func(s *corev1.Secret) { s.Annotations[api.AnnotationProof] += "x" }), proofs: testProofs, kind: childSecret},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.proofs.made(tc.kind, tc.child, tj); got != tc.want {
				t.Errorf("made = %t, want %t", got, tc.want)
			}
		})
	}
}

// A Secret's data is stamped too: a copy carrying the stamps of Torus's
// Secret and other data is told from the Secret Torus made.
func TestDataProofs(t *testing.T) {
	tj := trainJob("pi", "uid-1")
	made := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pi-mpi-ssh", Namespace: "ns", Annotations: map[string]string{api.AnnotationJobSetRestarts: "0"},
			OwnerReferences: []metav1.OwnerReference{children.OwnerReference(tj)},
		},
		Data: map[string][]byte{"ssh-privatekey": []byte("key"), "next-ssh-privatekey": []byte("next")},
	}
	testProofs.stamp(childSecret, made, tj)
	testProofs.stampData(childSecret, made, tj)
	copied := func(change func(*corev1.Secret)) *corev1.Secret {
		s := made.DeepCopy()
		change(s)
		return s
	}
	tests := map[string]struct {
		secret *corev1.Secret
		proofs proofs // testProofs when empty
		want   dataProof
	}{
		"made by Torus":             {secret: made, want: dataMade},
		"a copy of other next keys": {secret: copied(func(s *corev1.Secret) { s.Data["next-ssh-privatekey"] = []byte("chosen") }), want: dataForged},
		"a copy with a key added":   {secret: copied(func(s *corev1.Secret) { s.Data["extra"] = nil }), want: dataForged},
		"a copy with a key moved": {secret: copied(func(s *corev1.Secret) {
			s.Data = map[string][]byte{"ssh-privatekey": []byte("keynext-ssh-privatekey"), "next-ssh-privatekey": nil}
		}), want: dataForged},
		"its name's stamp forged":     {secret: copied(func(s *corev1.Secret) { s.Annotations[api.AnnotationProof] = "forged" }), want: dataForged},
		"its data's stamp dropped":    {secret: copied(func(s *corev1.Secret) { delete(s.Annotations, api.AnnotationProofData) }), want: dataUnstamped},
		"another run's":               {secret: copied(func(s *corev1.Secret) { s.Annotations[api.AnnotationJobSetRestarts] = "1" }), want: dataForged},
		"stamped under a retired key": {secret: made, proofs: newProofs(ProofKeys{Current: []byte("the next key"), Retired: [][]byte{[]byte("a key only the operator holds")}}), want: dataMade},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := testProofs
			if tc.proofs.keys != nil {
				p = tc.proofs
			}
			if got := p.dataProof(childSecret, tc.secret, tj); got != tc.want {
				t.Errorf("dataProof = %d, want %d", got, tc.want)
			}
		})
	}
}

// A child stamped under a key the operator no longer holds is told by its
// age from a stamp copied onto an object made after the current key.
func TestProvenance(t *testing.T) {
	tj := trainJob("pi", "uid-1")
	lostKey := newProofs(ProofKeys{Current: []byte("a key since lost"), Since: keySince.Add(-time.Hour)})
	retiring := newProofs(ProofKeys{Current: []byte("the next key"), Retired: [][]byte{[]byte("a key only the operator holds")}, Since: keySince})
	child := func(p proofs, created time.Time, change ...func(*corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: "pi-mpi-ssh", Namespace: "ns", CreationTimestamp: metav1.NewTime(created),
			Annotations:     map[string]string{api.AnnotationJobSetRestarts: "0"},
			OwnerReferences: []metav1.OwnerReference{children.OwnerReference(tj)},
		}}
		p.stamp(childSecret, s, tj)
		for _, c := range change {
			c(s)
		}
		return s
	}
	before, sameSecond, after := keySince.Add(-time.Minute), keySince.Add(400*time.Millisecond).Truncate(time.Second), keySince.Add(time.Minute)
	tests := map[string]struct {
		child *corev1.Secret
		p     proofs
		want  provenance
	}{
		"the current key":                       {child: child(testProofs, after), p: testProofs, want: provenCurrent},
		"a retired key":                         {child: child(testProofs, before), p: retiring, want: provenRetired},
		"a lost key, made before the current":   {child: child(lostKey, before), p: testProofs, want: stampedBefore},
		"a lost key, made in the key's second":  {child: child(lostKey, sameSecond), p: testProofs, want: unproven},
		"a copied stamp, made after the key":    {child: child(lostKey, after), p: testProofs, want: unproven},
		"no stamp, made before the current key": {child: child(lostKey, before, func(s *corev1.Secret) { delete(s.Annotations, api.AnnotationProof) }), p: testProofs, want: unproven},
		"another job's, made before":            {child: child(lostKey, before, func(s *corev1.Secret) { s.OwnerReferences[0].UID = "uid-2" }), p: testProofs, want: unproven},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.p.judge(childSecret, tc.child, tj); got != tc.want {
				t.Errorf("judge = %d, want %d", got, tc.want)
			}
		})
	}
}
