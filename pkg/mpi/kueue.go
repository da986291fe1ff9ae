package mpi

// Kueue's labels and annotations that Torus reads or writes.
const (
	KueueQueueLabel       = "kueue.x-k8s.io/queue-name"
	KueuePriorityLabel    = "kueue.x-k8s.io/priority-class"
	KueueRequiredTopology = "kueue.x-k8s.io/podset-required-topology"
	KueuePodSetGroup      = "kueue.x-k8s.io/podset-group-name"
	KueueManager          = "kueue.x-k8s.io/manager"
)
