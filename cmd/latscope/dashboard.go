package main

import (
	"context"
	"io"
	"os"

	"github.com/charmbracelet/x/term"

	"github.com/latscope/latscope/internal/shutdown"
	"github.com/latscope/latscope/tui"
)

// useDashboard reports whether the live dashboard opens: unless --no-tui,
// whenever stdout is a terminal (a pipe or a file gets the headless output).
func useDashboard(stdout io.Writer, noTUI bool) bool {
	if noTUI {
		return false
	}
	if s, ok := stdout.(*safeStream); ok {
		stdout = s.out // the terminal behind main's escaping
	}
	f, ok := stdout.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// showDashboard runs the dashboard until the user quits or ctx ends. The
// terminal's state is saved first, so that a second signal, which exits
// without waiting for Bubble Tea, still leaves it usable.
func showDashboard(ctx context.Context, feed tui.Feed, opts tui.Options) error {
	if opts.Input == nil && opts.Output == nil { // the terminal's, not a test's
		defer shutdown.From(ctx).OnForce(saveTerminal(os.Stdin, os.Stdout))()
	}
	return tui.Run(ctx, feed, opts)
}

// Escape sequences that undo the dashboard's: leave the alternate screen,
// show the cursor, stop mouse and bracketed-paste reports.
const terminalReset = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l"

// saveTerminal saves in's terminal mode and returns what puts the terminal
// back as it was: the mode restored, the screen and cursor reset on out.
func saveTerminal(in, out *os.File) (restore func()) {
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
