package main

import (
	"context"
	"fmt"
	"io"

	"github.com/latscope/latscope/internal/shutdown"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// Exit codes, documented in the README and in `latscope --help`.
const (
	exitFailure     = 1                 // bad flags, the server (or, attached, every agent) could not be reached or set up, a write failed, a bench target missed
	exitSLOMissed   = 2                 // --slo: at least one objective was missed
	exitAllFailed   = 3                 // requests were sent and none succeeded: every one that finished failed, or none finished (all cancelled at the run's end)
	exitInterrupted = shutdown.ExitCode // SIGINT, SIGTERM or SIGHUP, in any command: the summary so far was printed
)

// runSession measures target with f and prints the result (session.Run).
func runSession(ctx context.Context, stdout, stderr io.Writer, target string, f *loadFlags, extra *session.Extras) error {
	window, err := tui.ParseWindow(f.window)
	if err != nil {
		return fmt.Errorf("--window: %w", err)
	}
	o, err := f.sessionOptions(stderr, target)
	if err != nil {
		return err
	}
	o.Extras = extra
	session.TuneGC(o.Load)
	c := session.RunConfig{
		Session: o, Outputs: f.outputs(), SLO: f.slo, TTFTBasis: f.ttftBasis, JSON: f.jsonOut,
		View: tui.Options{Window: window, NoColor: f.noColor},
	}
	if useDashboard(stdout, f.noTUI) {
		c.Screen = showDashboard
	}
	return session.Run(ctx, stdout, stderr, c)
}

// outputs are the recording and export the flags ask for.
func (f *loadFlags) outputs() session.Outputs {
	return session.Outputs{Record: f.record, RecordOverwrite: f.recordOverwrite, OTLPExport: f.otlpExport, FlushTimeout: f.flushTimeout}
}
