package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// Exit codes, documented in the README and in `latscope --help`.
const (
	exitFailure     = 1   // bad flags, the server (or, attached, every agent) could not be reached or set up, a write failed, a bench target missed
	exitSLOMissed   = 2   // --slo: at least one objective was missed
	exitAllFailed   = 3   // requests were sent and none succeeded: every one that finished failed, or none finished (all cancelled at the run's end)
	exitInterrupted = 130 // SIGINT, SIGTERM or SIGHUP, in any command: the summary so far was printed
)

// runSession measures target with f and prints the result: the composition
// root opens the session, measures it, prints the summary and decides the
// exit code.
func runSession(ctx context.Context, stdout, stderr io.Writer, target string, f *loadFlags, extra *session.Extras) error {
	basis, err := aggregate.ParseTTFTBasis(f.ttftBasis)
	if err != nil {
		return fmt.Errorf("--ttft-basis: %w", err)
	}
	objectives, err := aggregate.ParseSLO(f.slo)
	if err != nil {
		return err
	}
	window, err := tui.ParseWindow(f.window)
	if err != nil {
		return fmt.Errorf("--window: %w", err)
	}
	if f.record != "" { // before the server is contacted: a typo costs nothing
		if err := recorder.CheckPath(f.record, recorder.Options{Overwrite: f.recordOverwrite}); err != nil {
			return fmt.Errorf("--record: %w", err)
		}
	}
	dashboard := useDashboard(stdout, f.noTUI)
	s, err := openSession(ctx, stderr, target, f, extra)
	if errors.Is(err, session.ErrSetupInterrupted) {
		return session.Exit(session.Interrupted, err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	m := session.Measurement{
		Pipe: s.PipelineConfig(),
		Agg:  aggregate.Config{Now: time.Now, OfferedRate: s.Offered, SLO: objectives, TTFTBasis: basis},
	}
	// While the dashboard runs nothing may print on stderr: notices go to
	// its header instead.
	var notices *tui.NoticeBoard
	progress := stderr
	if dashboard {
		notices = &tui.NoticeBoard{After: stderr}
		progress = notices
	} else {
		m.Observers = append(m.Observers, session.StatusLine(stderr))
		if f.record == "" { // a recording's failure is said at the next snapshot: keep them 4 a second
			m.Every = session.StatusEvery
		}
	}
	if err := addRecorderAndExport(ctx, progress, f, s, &m); err != nil {
		return err
	}
	var summary aggregate.Summary
	var interrupted bool
	var runErr error
	if dashboard {
		summary, interrupted, runErr = session.RunWithDashboard(ctx, m, showDashboard, notices, tui.Options{Objectives: objectives, Window: window, NoColor: f.noColor})
	} else {
		summary, interrupted, runErr = m.Run(ctx)
	}
	if f.jsonOut {
		err = aggregate.WriteJSON(stdout, summary)
	} else {
		err = aggregate.WriteTable(stdout, summary)
	}
	if err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	return session.Outcome(stderr, summary, objectives, interrupted, runErr)
}

// addRecorderAndExport adds the consumers --record and --otlp-export ask for.
func addRecorderAndExport(ctx context.Context, stderr io.Writer, f *loadFlags, s *session.Session, m *session.Measurement) error {
	if f.record != "" {
		rec, err := session.NewRecording(f.record, s.Header, f.recordOverwrite)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "latscope: recording to %s\n", f.record)
		m.Consumers = append(m.Consumers, rec)
		m.Observers = append(m.Observers, rec.WarnWhenBehind(stderr), rec.WarnWhenFailing(stderr, time.Now))
		// Clipped: the session's own list of aux sources stays as it is.
		m.Pipe.Aux = append(slices.Clip(m.Pipe.Aux), rec.Losses(time.Now))
	}
	if f.otlpExport != "" {
		exp, err := session.NewTraceExport(ctx, stderr, f.otlpExport, f.flushTimeout)
		if err != nil {
			return fmt.Errorf("--otlp-export: %w", err)
		}
		fmt.Fprintf(stderr, "latscope: exporting each request as a trace to %s\n", event.RedactURL(f.otlpExport))
		m.Consumers = append(m.Consumers, exp)
		m.Pipe.Aux = append(slices.Clip(m.Pipe.Aux), exp.Losses(time.Now))
	}
	return nil
}
