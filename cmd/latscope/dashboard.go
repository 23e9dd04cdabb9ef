package main

import (
	"context"
	"io"
	"os"

	"github.com/latscope/latscope/internal/shutdown"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// useDashboard reports whether the live dashboard opens: unless --no-tui,
// whenever stdout is a terminal (a pipe or a file gets the headless output).
func useDashboard(stdout io.Writer, noTUI bool) bool {
	if noTUI {
		return false
	}
	return session.IsTerminal(stdout)
}

// showDashboard runs the dashboard until the user quits or ctx ends. The
// terminal's state is saved first, so that a second signal, which exits
// without waiting for Bubble Tea, still leaves it usable.
func showDashboard(ctx context.Context, feed tui.Feed, opts tui.Options) error {
	if opts.Input == nil && opts.Output == nil { // the terminal's, not a test's
		defer shutdown.From(ctx).OnForce(tui.SaveTerminal(os.Stdin, os.Stdout))()
	}
	return tui.Run(ctx, feed, opts)
}
