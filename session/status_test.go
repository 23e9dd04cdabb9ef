package session

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/creack/pty"

	"github.com/latscope/latscope/internal/textsafe"
)

// The status line comes every second on a terminal and every 10 seconds in
// a log (a file, a pipe), behind main's escaping writer or not.
func TestStatusEveryFollowsTheTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"buffer": &bytes.Buffer{}, "pipe": w, "escaped pipe": textsafe.NewShared(w)} {
		if got := statusEvery(out); got != StatusLogEvery {
			t.Errorf("%s: %s, want %s", name, got, StatusLogEvery)
		}
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here, so the terminal's period is not checked: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	for name, out := range map[string]io.Writer{"terminal": tty, "escaped terminal": textsafe.NewShared(tty)} {
		if got := statusEvery(out); got != StatusEvery {
			t.Errorf("%s: %s, want %s", name, got, StatusEvery)
		}
	}
}
