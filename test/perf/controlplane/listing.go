package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// listRuns: each listing command runs this many times, alternating, and
// the median is reported (the machine's speed drifts between runs).
const listRuns = 3

// listing times kubectl mpi list -A against kubectl get trainjobs -A on a
// control plane holding the batch's jobs: to the first job's row and to
// the end.
type listing struct {
	MPIRows, GetRows int
	MPI, Get         []listTime
}

type listTime struct{ First, Total time.Duration }

// median returns the median first row and end of runs.
func median(runs []listTime) listTime {
	first := make([]time.Duration, len(runs))
	total := make([]time.Duration, len(runs))
	for i, r := range runs {
		first[i], total[i] = r.First, r.Total
	}
	return listTime{middle(first), middle(total)}
}

// middle is the middle value of xs once sorted (the upper one of an even
// count); xs is left as it was.
func middle[T cmp.Ordered](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// measureListing runs both commands against the API server directly (not
// through the counting proxy, whose tally belongs to the controller).
func measureListing(ctx context.Context, cp *controlPlane, bins binaries, dir string) (*listing, error) {
	kubeconfig, err := directKubeconfig(cp, dir)
	if err != nil {
		return nil, err
	}
	l := &listing{}
	for range listRuns {
		mpi, rows, err := timeListing(ctx, bins.plugin, "--kubeconfig", kubeconfig, "list", "-A")
		if err != nil {
			return nil, fmt.Errorf("kubectl mpi list -A: %w", err)
		}
		l.MPI, l.MPIRows = append(l.MPI, mpi), rows
		get, rows, err := timeListing(ctx, filepath.Join(bins.testbin, "kubectl"), "--kubeconfig", kubeconfig, "get", "trainjobs", "-A")
		if err != nil {
			return nil, fmt.Errorf("kubectl get trainjobs -A: %w", err)
		}
		l.Get, l.GetRows = append(l.Get, get), rows
		if l.MPIRows != l.GetRows {
			return nil, fmt.Errorf("kubectl mpi list -A printed %d jobs, kubectl get trainjobs -A %d", l.MPIRows, l.GetRows)
		}
	}
	return l, nil
}

// directKubeconfig writes a kubeconfig for the API server itself, not the
// counting proxy, whose tally belongs to the controller.
func directKubeconfig(cp *controlPlane, dir string) (string, error) {
	kubeconfig := filepath.Join(dir, "direct.kubeconfig")
	return kubeconfig, cp.writeKubeconfig(kubeconfig, cp.config.Host)
}

// timeListing runs a listing command and returns when its first row (the
// line after the header) arrived and when it ended, and its row count.
func timeListing(ctx context.Context, name string, args ...string) (listTime, int, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return listTime{}, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return listTime{}, 0, err
	}
	var t listTime
	lines := 0
	r := bufio.NewReader(stdout)
	for {
		_, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return t, 0, err
		}
		if lines++; lines == 2 {
			t.First = time.Since(start)
		}
	}
	if err := cmd.Wait(); err != nil {
		return t, 0, fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	t.Total = time.Since(start)
	return t, lines - 1, nil
}
