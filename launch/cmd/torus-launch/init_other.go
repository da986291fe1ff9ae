//go:build !linux

package main

// asInit: only Linux containers run the agent as their first process.
func asInit() bool { return false }

func runInit([]string) int { return 1 }
