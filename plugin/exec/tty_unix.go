//go:build !windows

package exec

import (
	"os"
	"os/signal"
	"syscall"
)

// resizes signals terminal size changes (SIGWINCH).
func resizes() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	return ch, func() { signal.Stop(ch) }
}
