//go:build unix

package cmdutil

import "syscall"

// Flags that keep an open from following a symbolic link at the last
// component, or from waiting on a FIFO.
const (
	openNoFollow = syscall.O_NOFOLLOW
	openNonBlock = syscall.O_NONBLOCK
)
