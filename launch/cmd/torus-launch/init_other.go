//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// asInit: only Linux containers run the agent as their first process.
func asInit() bool { return false }

func runInit([]string) int { return 1 }

// canSupervise: the launcher's command runs in the wait's place instead.
const canSupervise = false

func supervise(*exec.Cmd) (int, bool, error) {
	return 1, false, errors.New("supervise runs on Linux only")
}
