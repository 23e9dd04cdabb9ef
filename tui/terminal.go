package tui

import (
	"io"
	"os"

	"github.com/charmbracelet/x/term"
)

// Escape sequences that undo the dashboard's: leave the alternate screen,
// show the cursor, stop mouse and bracketed-paste reports.
const terminalReset = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l"

// SaveTerminal saves in's terminal mode and returns what puts the terminal
// back as it was: the mode restored, the screen and cursor reset on out.
func SaveTerminal(in, out *os.File) (restore func()) {
	var state *term.State
	if term.IsTerminal(in.Fd()) {
		state, _ = term.GetState(in.Fd())
	}
	return func() {
		_, _ = io.WriteString(out, terminalReset)
		if state != nil {
			_ = term.Restore(in.Fd(), state)
		}
	}
}
