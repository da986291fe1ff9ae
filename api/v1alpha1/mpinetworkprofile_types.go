package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MPINetworkProfile names an InfiniBand or RoCE setup once, for every MPI
// job that selects it with the annotation torus-mpi.io/network-profile: the
// NetworkAttachmentDefinitions to attach, the RDMA device resources to
// request, capabilities, /dev/shm and the MPI, NCCL and UCX environment.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=mpinet;mpinets,categories=torus
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Networks",type=string,JSONPath=`.spec.networks[*].name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MPINetworkProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MPINetworkProfileSpec   `json:"spec"`
	Status MPINetworkProfileStatus `json:"status,omitempty"`
}

// MPINetworkProfileSpec is the network setup.
type MPINetworkProfileSpec struct {
	// networks are the NetworkAttachmentDefinitions attached to each pod that
	// gets the profile, in order (Multus names them net1, net2, ...).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Networks []NetworkAttachment `json:"networks"`

	// capabilities are added to the containers that run ranks. RDMA needs
	// IPC_LOCK to pin memory.
	// +kubebuilder:default={"IPC_LOCK"}
	// +optional
	// +listType=set
	Capabilities []corev1.Capability `json:"capabilities,omitempty"`

	// sharedMemorySize is the size of the in-memory /dev/shm each pod gets
	// (NCCL and MPI's shared-memory transports need more than the default
	// 64Mi). Unset leaves /dev/shm alone.
	// +optional
	SharedMemorySize *resource.Quantity `json:"sharedMemorySize,omitempty"`

	// env is added to the containers that run ranks, and to the launcher:
	// entries without an implementation apply to every job, the others only
	// to jobs of that implementation (NCCL_IB_HCA, NCCL_SOCKET_IFNAME,
	// UCX_NET_DEVICES, UCX_TLS, OMPI_MCA_pml, OMPI_MCA_btl, I_MPI_FABRICS,
	// FI_PROVIDER, ...).
	// +optional
	// +listType=atomic
	Env []ProfileEnv `json:"env,omitempty"`

	// applyTo chooses the pods that get the networks: RankPods (workers,
	// and the launcher when it runs ranks) or AllPods.
	// +kubebuilder:default=RankPods
	// +optional
	ApplyTo ApplyTo `json:"applyTo,omitempty"`

	// failOnMissingNetworks fails a running job whose pods did not get every
	// interface (and RDMA device), instead of letting MPI hang in MPI_Init.
	// +kubebuilder:default=true
	// +optional
	FailOnMissingNetworks *bool `json:"failOnMissingNetworks,omitempty"`

	// namespaceSelector reserves the profile for the namespaces whose labels
	// it matches, as a Kueue ClusterQueue's does: a TrainJob of any other
	// namespace that selects it is refused at admission. Unset, or empty,
	// every namespace may use it.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// NetworkAttachment is one NetworkAttachmentDefinition to attach.
type NetworkAttachment struct {
	// name of the NetworkAttachmentDefinition.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the NetworkAttachmentDefinition; empty means the job's
	// own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// interface is the interface name inside the pod (e.g. net1, ib0).
	// +optional
	// +kubebuilder:validation:MaxLength=15
	Interface string `json:"interface,omitempty"`
	// resourceName overrides the device resource read from the
	// NetworkAttachmentDefinition's k8s.v1.cni.cncf.io/resourceName
	// annotation (e.g. openshift.io/mlnxnics, rdma/hca_shared_devices_a).
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
	// resourceCount is how many of that resource each pod requests.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	ResourceCount *int32 `json:"resourceCount,omitempty"`
	// rdma expects an RDMA device on the interface: Multus's network-status
	// must report device-info.pci.rdma-device for it (SR-IOV RDMA).
	// +optional
	RDMA bool `json:"rdma,omitempty"`
}

// ProfileEnv is an environment variable, optionally for one MPI
// implementation only.
type ProfileEnv struct {
	corev1.EnvVar `json:",inline"`
	// implementation limits the variable to jobs of one MPI implementation.
	// +kubebuilder:validation:Enum=OpenMPI;OpenMPI5;Intel;MPICH
	// +optional
	Implementation string `json:"implementation,omitempty"`
}

// ApplyTo selects the pods a profile applies to.
// +kubebuilder:validation:Enum=RankPods;AllPods
type ApplyTo string

const (
	// ApplyToRankPods: the pods that run ranks.
	ApplyToRankPods ApplyTo = "RankPods"
	// ApplyToAllPods: every pod of the job, the launcher too.
	ApplyToAllPods ApplyTo = "AllPods"
)

// MPINetworkProfileStatus reports whether the profile can be used.
type MPINetworkProfileStatus struct {
	// conditions: Ready is True when every NetworkAttachmentDefinition exists
	// and has a device resource.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// networks reports each attachment's state.
	// +optional
	// +listType=atomic
	Networks []NetworkAttachmentStatus `json:"networks,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// NetworkAttachmentStatus is what Torus found for one attachment.
type NetworkAttachmentStatus struct {
	// name and namespace of the NetworkAttachmentDefinition.
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// resourceName is the device resource pods request for it.
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
	// problem says what is wrong with it, and how to fix it; empty when
	// nothing is.
	// +optional
	Problem string `json:"problem,omitempty"`
}

// MPINetworkProfileList is a list of MPINetworkProfiles.
// +kubebuilder:object:root=true
type MPINetworkProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MPINetworkProfile `json:"items"`
}
