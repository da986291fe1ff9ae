package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// placement pins the benchmark's processes to CPUs. Split, etcd and the
// API server run on CPU 0 and everything else (this process with its
// counting proxy and creators, and the controller, which inherits it) on
// CPU 1: as on a cluster, whose control plane has machines of its own,
// the controller then takes none of the API server's CPU. The zero value
// pins nothing.
type placement struct {
	split bool
}

const (
	controlPlaneCPU = 0
	othersCPU       = 1
)

// pinSelf moves every thread of this process to the others' CPU; threads
// made later, and children, inherit it.
func (p placement) pinSelf() error {
	if !p.split {
		return nil
	}
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("-split-cores needs at least 2 CPUs, and %d is available: run without it", runtime.NumCPU())
	}
	var set unix.CPUSet
	set.Set(othersCPU)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("listing this process's threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pinning thread %d to CPU %d: %w", tid, othersCPU, err)
		}
	}
	return nil
}

// controlPlane has argv run on the control plane's CPU.
func (p placement) controlPlane(argv []string) []string {
	if !p.split {
		return argv
	}
	return append([]string{"taskset", "--cpu-list", strconv.Itoa(controlPlaneCPU)}, argv...)
}
