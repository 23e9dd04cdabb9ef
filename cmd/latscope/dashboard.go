package main

import (
	"context"
	"io"
	"os"

	"github.com/charmbracelet/x/term"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/session"
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

// runWithDashboard runs m while the dashboard shows it, until the user quits
// (q, Ctrl-C) or ctx ends; quitting stops measuring, and every request in
// flight still ends in exactly one outcome. It returns the run's summary,
// for the caller to print once the terminal is restored, and whether ctx
// (a signal) interrupted it.
func runWithDashboard(ctx context.Context, m session.Measurement, notices *tui.NoticeBoard, opts tui.Options) (aggregate.Summary, bool, error) {
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	m.Observers = append(m.Observers, snaps.Put)
	feeds := make(chan *tui.LiveFeed, 1)
	m.Consumers = append(m.Consumers, dashboardFeed{snaps: snaps, feeds: feeds})

	measureCtx, stopMeasuring := context.WithCancelCause(ctx)
	defer stopMeasuring(nil)
	type result struct {
		summary     aggregate.Summary
		interrupted bool
		err         error
	}
	done := make(chan result, 1)
	go func() {
		s, interrupted, err := m.Run(measureCtx)
		done <- result{s, interrupted, err}
	}()
	feed := <-feeds // the consumers start before the pipeline does
	uiErr := showDashboard(ctx, tui.WithNotices(feed, notices), opts)
	notices.Detach() // what the end waits for is said on the restored terminal
	// Quitting is the run's own end: the requests in flight are cancelled
	// at the end of the run, not errors (unless ctx, a signal, ended first).
	stopMeasuring(pipeline.ErrRunEnded)
	res := <-done
	if ctx.Err() == nil {
		res.interrupted = false // quitting the dashboard is how a run ends
	}
	if uiErr != nil && res.err == nil {
		res.err = uiErr
	}
	return res.summary, res.interrupted, res.err
}

// dashboardFeed is the dashboard's feed of the aggregator's snapshots (the
// requests view's sample is in them). The screen never holds up measuring.
type dashboardFeed struct {
	snaps *pipeline.Latest[aggregate.Snapshot]
	feeds chan<- *tui.LiveFeed
}

func (d dashboardFeed) Start(context.Context, *pipeline.Fanout) func() error {
	d.feeds <- tui.NewLiveFeed(d.snaps)
	return func() error { return nil }
}

// showDashboard runs the dashboard until the user quits or ctx ends. The
// terminal's state is saved first, so that a second signal, which exits
// without waiting for Bubble Tea, still leaves it usable.
func showDashboard(ctx context.Context, feed tui.Feed, opts tui.Options) error {
	if opts.Input == nil && opts.Output == nil { // the terminal's, not a test's
		defer shutdownFrom(ctx).onForce(saveTerminal(os.Stdin, os.Stdout))()
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
