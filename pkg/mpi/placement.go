package mpi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/torus-mpi/torus/api"
)

// Host is one MPI host of a job: a pod running ranks.
type Host struct {
	// Role is api.RoleLauncher or api.RoleWorker.
	Role string
	// ReplicatedJob is the JobSet replicated job the pod belongs to.
	ReplicatedJob string
	// Index is the pod's completion index within its replicated job.
	Index int32
	// Address is the host name written into the hostfile.
	Address string
}

// Name is how users see the host: "launcher" or "worker-<index>".
func (h Host) Name() string {
	if h.Role == api.RoleLauncher {
		return api.RoleLauncher
	}
	return fmt.Sprintf("%s-%d", api.RoleWorker, h.Index)
}

// ParseHost reads a host's Name back: "launcher" or "worker-<index>".
func ParseHost(name string) (Host, bool) {
	if name == api.RoleLauncher {
		return Host{Role: api.RoleLauncher}, true
	}
	idx, ok := strings.CutPrefix(name, api.RoleWorker+"-")
	if !ok {
		return Host{}, false
	}
	i, err := strconv.ParseInt(idx, 10, 32)
	if err != nil || i < 0 || fmt.Sprint(i) != idx {
		return Host{}, false
	}
	return Host{Role: api.RoleWorker, Index: int32(i)}, true
}

// Placement maps MPI ranks to hosts. Every implementation Torus supports
// fills hosts in hostfile order, SlotsPerHost ranks each, when the launch
// command does not override the mapping.
type Placement struct {
	Hosts        []Host
	SlotsPerHost int32
}

// NewPlacement lays out a job's hosts: the launcher first when it runs ranks,
// then the workers by index.
func NewPlacement(trainJob string, workers, slotsPerHost int32, launcherRunsRanks bool) Placement {
	hosts := make([]Host, 0, workers+1)
	if launcherRunsRanks {
		hosts = append(hosts, Host{
			Role: api.RoleLauncher, ReplicatedJob: LauncherJob, Index: 0,
			Address: HostAddress(trainJob, LauncherJob, 0),
		})
	}
	for i := range workers {
		hosts = append(hosts, Host{
			Role: api.RoleWorker, ReplicatedJob: NodeJob, Index: i,
			Address: HostAddress(trainJob, NodeJob, i),
		})
	}
	return Placement{Hosts: hosts, SlotsPerHost: slotsPerHost}
}

// Size is the number of ranks, the MPI world size.
func (p Placement) Size() int32 { return int32(len(p.Hosts)) * p.SlotsPerHost }

// HostOfRank returns the host that runs a rank.
func (p Placement) HostOfRank(rank int32) (Host, error) {
	if rank < 0 || rank >= p.Size() {
		return Host{}, fmt.Errorf("rank %d is out of range: the job has ranks 0 to %d", rank, p.Size()-1)
	}
	return p.Hosts[rank/p.SlotsPerHost], nil
}

// Ranks returns the first and last rank of a host, or ok=false when the host
// runs no ranks (a launcher that is not a node).
func (p Placement) Ranks(role string, index int32) (first, last int32, ok bool) {
	i, ok := p.position(role, index)
	if !ok {
		return 0, 0, false
	}
	first = int32(i) * p.SlotsPerHost
	return first, first + p.SlotsPerHost - 1, true
}

// position is a host's place in the hostfile, found from NewPlacement's
// order (the launcher first when it runs ranks, then the workers by index)
// rather than by a scan: the operator's diagnosis asks for every pod of a
// job on every pod event, and a scan made that quadratic in the job's size.
func (p Placement) position(role string, index int32) (int, bool) {
	i := int(index)
	launcherFirst := len(p.Hosts) > 0 && p.Hosts[0].Role == api.RoleLauncher
	switch {
	case role == api.RoleLauncher:
		i = 0
	case launcherFirst:
		i++
	}
	if i < 0 || i >= len(p.Hosts) || p.Hosts[i].Role != role || p.Hosts[i].Index != index {
		return 0, false
	}
	return i, true
}

// RankRange formats a host's ranks for people: "rank 4" or "ranks 4-7".
func (p Placement) RankRange(role string, index int32) string {
	first, last, ok := p.Ranks(role, index)
	switch {
	case !ok:
		return "no ranks"
	case first == last:
		return fmt.Sprintf("rank %d", first)
	default:
		return fmt.Sprintf("ranks %d-%d", first, last)
	}
}
