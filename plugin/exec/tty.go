package exec

import (
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/kubectl/pkg/util/term"
)

// remoteSizes passes the size events of kubectl's terminal handling
// (term.TTY.MonitorSize) on to the remote command stream, whose type for
// them is client-go's; nil stays nil (no terminal to follow).
func remoteSizes(q term.TerminalSizeQueue) remotecommand.TerminalSizeQueue {
	if q == nil {
		return nil
	}
	return sizeQueue{q}
}

type sizeQueue struct{ term.TerminalSizeQueue }

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s := q.TerminalSizeQueue.Next()
	if s == nil {
		return nil
	}
	return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
}
