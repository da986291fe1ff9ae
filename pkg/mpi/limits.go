package mpi

import "time"

import "fmt"

// Bounds on a job's size. A TrainJob's numNodes and numProcPerNode are
// int32s that nothing upstream bounds above; Torus renders a hostfile line
// per worker into the job's Secret, and the operator's memory and every write
// it makes grow with them. Without bounds, one TrainJob could make the
// operator, which also serves the webhooks every TrainJob write goes
// through, fail on every start.
const (
	// DefaultMaxNodes is the default of the operator's --max-nodes: the
	// largest numNodes it admits and runs. The hostfile of 16,384 workers
	// fits in the job's Secret (maxHostfileBytes) when its lines are about
	// 60 bytes (short job and namespace names); CheckSize refuses longer
	// ones by the hostfile's own size.
	DefaultMaxNodes int32 = 16384
	// MaxRestarts bounds a job's restart budget (api.AnnotationMaxRestarts):
	// the program's own failures, each of which runs the whole world again.
	MaxRestarts int32 = 100
	// MaxTerminationGracePeriod bounds a job's grace period
	// (api.AnnotationTerminationGracePeriod). Kueue admits the job that
	// preempts another only once the preempted job's pods are gone, and a
	// node drain waits for them too: a job's grace period is time it holds
	// its quota and its nodes from others.
	MaxTerminationGracePeriod = time.Hour
	// MinStallTimeout and MaxStallTimeout bound a job's stall timeout
	// (api.AnnotationStallTimeout): the operator reads the end of a
	// running job's launcher output a few times within it, and a training
	// that prints nothing for a week is not watched by a timeout.
	MinStallTimeout = time.Minute
	MaxStallTimeout = 7 * 24 * time.Hour
	// AbsoluteMaxNodes is what --max-nodes may be raised to, and what
	// ResolveJob accepts whatever the configuration.
	AbsoluteMaxNodes int32 = 65536
	// MaxSlotsPerNode bounds numProcPerNode: ranks on one pod.
	MaxSlotsPerNode int32 = 4096
	// maxHostfileBytes is what the hostfile may take of the job's Secret,
	// whose data the API server limits to 1 MiB: the rest is for two
	// generations of keys (RSA ones the largest) and the SSH configuration.
	maxHostfileBytes = 1<<20 - 64<<10
)

// SizeError says a job is larger (or smaller) than Torus runs.
type SizeError struct{ msg string }

func (e *SizeError) Error() string { return e.msg }

func sizeErrorf(format string, args ...any) error {
	return &SizeError{msg: fmt.Sprintf(format, args...)}
}

// checkBounds refuses sizes no configuration admits, before anything is
// computed from them.
func checkBounds(j *Job) error {
	switch {
	case j.NumNodes < 1:
		return sizeErrorf("numNodes is %d: a job needs at least 1 node", j.NumNodes)
	case j.NumNodes > AbsoluteMaxNodes:
		return sizeErrorf("numNodes is %d: Torus runs at most %d nodes a job", j.NumNodes, AbsoluteMaxNodes)
	case j.SlotsPerHost < 1:
		return sizeErrorf("numProcPerNode is %d: a node needs at least 1 slot", j.SlotsPerHost)
	case j.SlotsPerHost > MaxSlotsPerNode:
		return sizeErrorf("numProcPerNode is %d: Torus runs at most %d ranks a node", j.SlotsPerHost, MaxSlotsPerNode)
	}
	return nil
}

// CheckSize refuses a job larger than the operator runs: more than
// maxNodes nodes, or a hostfile that does not fit in its Secret.
func (j *Job) CheckSize(maxNodes int32) error {
	if j.NumNodes > maxNodes {
		return sizeErrorf("numNodes is %d, more than the %d nodes this Torus operator runs (its --max-nodes): use fewer nodes, or more slots per node",
			j.NumNodes, maxNodes)
	}
	if n := len(j.Hostfile()); n > maxHostfileBytes {
		fit := int64(maxHostfileBytes) * int64(j.Workers) / int64(n)
		return sizeErrorf("the hostfile of %d workers takes %d bytes, more than the %d the job's Secret holds beside its keys: use at most %d workers with this job name and namespace, or shorter names",
			j.Workers, n, maxHostfileBytes, fit)
	}
	return nil
}
