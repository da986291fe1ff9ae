package cmdutil

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// Progress shows the state of a long wait. On a terminal it is one line,
// rewritten in place and erased when the wait ends; anywhere else (a pipe,
// a file, CI logs) each new state is written once on a line of its own, so
// that nothing is garbled. It writes to standard error, never to the output
// scripts read.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width int
	last  string
	shown bool
}

// NewProgress writes progress to w (standard error).
func NewProgress(w io.Writer) *Progress {
	p := &Progress{w: w, width: 100}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 10 {
			p.width = width
		}
	}
	return p
}

// IsTerminal reports whether progress is drawn in place.
func (p *Progress) IsTerminal() bool { return p.tty }

// Update shows a state. On a terminal the same state may be shown again
// (with a new elapsed time); elsewhere a repeated state is not written.
func (p *Progress) Update(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		line := msg
		if len(line) > p.width-1 {
			line = line[:p.width-2] + "…"
		}
		fmt.Fprint(p.w, "\r\033[K"+line)
		p.shown = true
		return
	}
	if msg == p.last {
		return
	}
	p.last = msg
	fmt.Fprintln(p.w, msg)
}

// UpdateState is Update for states that carry a changing part (elapsed
// time): off a terminal, only a new state is written.
func (p *Progress) UpdateState(state, detail string) {
	p.mu.Lock()
	tty := p.tty
	if !tty {
		if state == p.last {
			p.mu.Unlock()
			return
		}
		p.last = state
		p.mu.Unlock()
		fmt.Fprintln(p.w, state)
		return
	}
	p.mu.Unlock()
	p.Update("%s%s", state, detail)
}

// Done erases the progress line on a terminal.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
