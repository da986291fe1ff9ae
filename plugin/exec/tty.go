package exec

import (
	"context"
	"io"
	"os"

	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"
)

// Terminal is the local terminal of an interactive session: raw while the
// remote command runs, its size passed on as it changes.
type Terminal struct {
	in    *os.File
	out   *os.File
	state *term.State
}

// OpenTerminal returns the terminal behind in and out, or nil when in is
// not one.
func OpenTerminal(in io.Reader, out io.Writer) *Terminal {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	t := &Terminal{in: f}
	if o, ok := out.(*os.File); ok && term.IsTerminal(int(o.Fd())) {
		t.out = o
	}
	return t
}

// Raw puts the terminal in raw mode; Restore undoes it.
func (t *Terminal) Raw() error {
	state, err := term.MakeRaw(int(t.in.Fd()))
	if err != nil {
		return err
	}
	t.state = state
	return nil
}

// Restore returns the terminal to how it was.
func (t *Terminal) Restore() {
	if t.state != nil {
		_ = term.Restore(int(t.in.Fd()), t.state)
		t.state = nil
	}
}

func (t *Terminal) size() *remotecommand.TerminalSize {
	f := t.out
	if f == nil {
		f = t.in
	}
	w, h, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return nil
	}
	return &remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
}

// Sizes reports the terminal's size now and after every change, until ctx
// ends.
func (t *Terminal) Sizes(ctx context.Context) remotecommand.TerminalSizeQueue {
	q := &sizeQueue{ch: make(chan remotecommand.TerminalSize, 1)}
	if s := t.size(); s != nil {
		q.ch <- *s
	}
	changes, stop := resizes()
	go func() {
		defer stop()
		defer close(q.ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				if s := t.size(); s != nil {
					select {
					case q.ch <- *s:
					default:
					}
				}
			}
		}
	}()
	return q
}

type sizeQueue struct {
	ch chan remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.ch
	if !ok {
		return nil
	}
	return &s
}
