package mpi

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torus-mpi/torus/api"
)

func TestHostfile(t *testing.T) {
	cases := map[string]struct {
		impl      Implementation
		workers   int32
		slots     int32
		launcher  bool
		wantLines string
	}{
		"openmpi": {
			impl: OpenMPI, workers: 2, slots: 4,
			wantLines: "pi-node-0-0.pi slots=4\npi-node-0-1.pi slots=4\n",
		},
		"openmpi5 uses the same format": {
			impl: OpenMPI5, workers: 1, slots: 1,
			wantLines: "pi-node-0-0.pi slots=1\n",
		},
		"intel": {
			impl: IntelMPI, workers: 2, slots: 2,
			wantLines: "pi-node-0-0.pi:2\npi-node-0-1.pi:2\n",
		},
		"mpich with the launcher as a node": {
			impl: MPICH, workers: 2, slots: 3, launcher: true,
			wantLines: "pi-launcher-0-0.pi:3\npi-node-0-0.pi:3\npi-node-0-1.pi:3\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Hostfile(tc.impl, NewPlacement("pi", tc.workers, tc.slots, tc.launcher))
			if diff := cmp.Diff(tc.wantLines, got); diff != "" {
				t.Errorf("Hostfile (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPlacement(t *testing.T) {
	p := NewPlacement("job", 3, 4, true)
	if got := p.Size(); got != 16 {
		t.Fatalf("Size() = %d, want 16", got)
	}
	cases := map[string]struct {
		rank     int32
		wantHost string
		wantErr  bool
	}{
		"rank 0 is on the launcher":     {rank: 0, wantHost: "launcher"},
		"rank 3 is the launcher's last": {rank: 3, wantHost: "launcher"},
		"rank 4 is worker-0's first":    {rank: 4, wantHost: "worker-0"},
		"the last rank":                 {rank: 15, wantHost: "worker-2"},
		"past the end":                  {rank: 16, wantErr: true},
		"negative":                      {rank: -1, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := p.HostOfRank(tc.rank)
			if (err != nil) != tc.wantErr {
				t.Fatalf("HostOfRank(%d) error = %v, wantErr %t", tc.rank, err, tc.wantErr)
			}
			if err == nil && h.Name() != tc.wantHost {
				t.Errorf("HostOfRank(%d) = %s, want %s", tc.rank, h.Name(), tc.wantHost)
			}
		})
	}
	if got, want := p.RankRange(api.RoleWorker, 1), "ranks 8-11"; got != want {
		t.Errorf("RankRange(worker 1) = %q, want %q", got, want)
	}
	if got, want := NewPlacement("job", 2, 1, false).RankRange(api.RoleLauncher, 0), "no ranks"; got != want {
		t.Errorf("RankRange(launcher) = %q, want %q", got, want)
	}
	// Every host's ranks agree with HostOfRank, and hosts the job does not
	// have run none.
	for _, launcherRuns := range []bool{true, false} {
		p := NewPlacement("job", 5, 2, launcherRuns)
		for rank := range p.Size() {
			h, err := p.HostOfRank(rank)
			if err != nil {
				t.Fatal(err)
			}
			if first, last, ok := p.Ranks(h.Role, h.Index); !ok || rank < first || rank > last {
				t.Errorf("launcher runs ranks %t: Ranks(%s) = %d-%d %t, want it to hold rank %d", launcherRuns, h.Name(), first, last, ok, rank)
			}
		}
		for _, h := range []Host{{Role: api.RoleWorker, Index: 5}, {Role: api.RoleWorker, Index: -1}, {Role: api.RoleLauncher, Index: 1}} {
			if _, _, ok := p.Ranks(h.Role, h.Index); ok {
				t.Errorf("launcher runs ranks %t: %s %d has ranks", launcherRuns, h.Role, h.Index)
			}
		}
	}
}

func TestMaxTrainJobNameLength(t *testing.T) {
	cases := map[string]struct {
		workers int32
		want    int
	}{
		"the launcher's pod name is the longer": {workers: 8, want: 44},
		"a million workers outgrow it":          {workers: 1000000, want: 43},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := MaxTrainJobNameLength(tc.workers); got != tc.want {
				t.Errorf("MaxTrainJobNameLength(%d) = %d, want %d", tc.workers, got, tc.want)
			}
		})
	}
}
