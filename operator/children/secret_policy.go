package children

import (
	"crypto/rand"
	"strconv"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// NetworkPolicyName is the name of a job's NetworkPolicy.
func NetworkPolicyName(trainJob string) string { return trainJob + "-mpi" }

// BuildSSHSecret makes a job's Secret for a JobSet restart count: current
// SSH keys for that run (fresh when nil) and fresh keys for the next (see
// SSHSecretData), of the job's key algorithm, else alg, and the hostfile.
func BuildSSHSecret(tj *trainer.TrainJob, job *mpi.Job, restarts int32, current *mpi.SSHKeys, alg mpi.KeyAlgorithm) (*corev1.Secret, error) {
	comment := "torus-mpi " + tj.Namespace + "/" + tj.Name
	if job.SSH.KeyAlgorithm != "" {
		alg = job.SSH.KeyAlgorithm
	}
	if current == nil {
		var err error
		if current, err = mpi.GenerateSSHKeys(rand.Reader, alg, comment); err != nil {
			return nil, err
		}
	}
	next, err := mpi.GenerateSSHKeys(rand.Reader, alg, comment)
	if err != nil {
		return nil, err
	}
	data := mpi.SSHSecretData(tj.Name, restarts, current, next, job.SSH)
	// The launcher mounts the hostfile from here: one object fewer to
	// write per job than a ConfigMap of its own.
	data[mpi.HostfileKey] = []byte(job.Hostfile())
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            mpi.SSHSecretName(tj.Name),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{api.LabelJobName: tj.Name},
			Annotations:     map[string]string{api.AnnotationJobSetRestarts: strconv.Itoa(int(restarts))},
			OwnerReferences: []metav1.OwnerReference{OwnerReference(tj)},
		},
		Type:      corev1.SecretTypeSSHAuth,
		Immutable: ptr.To(true),
		Data:      data,
	}, nil
}

// BuildNetworkPolicy admits ingress to a job's pods only from the job's own
// pods, on any port: sshd and MPI's dynamic ports. Egress is not restricted,
// so DNS and the launcher's connections to workers keep working.
func BuildNetworkPolicy(tj *trainer.TrainJob) *networkingv1.NetworkPolicy {
	own := metav1.LabelSelector{MatchLabels: map[string]string{api.LabelJobName: tj.Name}}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:            NetworkPolicyName(tj.Name),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{api.LabelJobName: tj.Name},
			OwnerReferences: []metav1.OwnerReference{OwnerReference(tj)},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: own,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &own}}}},
		},
	}
}
