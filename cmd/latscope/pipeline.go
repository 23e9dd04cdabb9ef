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
		return &exitError{code: exitInterrupted, err: err}
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
		summary, interrupted, runErr = runWithDashboard(ctx, m, notices, tui.Options{Objectives: objectives, Window: window, NoColor: f.noColor})
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
	return outcome(stderr, summary, objectives, interrupted, runErr)
}

// outcome maps a finished run to its exit: an interruption, an error of the
// run itself, no request succeeding, or a missed objective, in that order.
func outcome(stderr io.Writer, s aggregate.Summary, objectives []aggregate.Objective, interrupted bool, runErr error) error {
	switch {
	case interrupted:
		return &exitError{code: exitInterrupted, err: errors.New("interrupted: the summary covers the requests sent until then")}
	case runErr != nil:
		return runErr
	case s.Requests.Errors > 0 && s.Requests.OK == 0:
		// Requests the run's own end cancelled (quitting the dashboard,
		// --duration and --drain) did not fail; all the others did.
		return &exitError{code: exitAllFailed, err: allFailed(s)}
	case s.Requests.CancelledAtEnd > 0 && s.Requests.OK == 0:
		// None failed, but none succeeded either: the run measured
		// nothing, which is no success (a queue deeper than the run).
		return &exitError{code: exitAllFailed, err: noneFinished(s.Requests)}
	case len(objectives) > 0:
		return checkSLO(stderr, s, objectives)
	}
	return nil
}

// allFailed says that every request that finished failed, and how most
// did; those the run's end cancelled are named apart.
func allFailed(s aggregate.Summary) error {
	r := s.Requests
	if r.CancelledAtEnd > 0 {
		return fmt.Errorf("all %d finished requests failed%s; %d more were cancelled at the end of the run", r.Errors, topErrorHint(s), r.CancelledAtEnd)
	}
	return fmt.Errorf("all %d requests failed%s", r.Errors, topErrorHint(s))
}

// noneFinished says that no request finished before the run's end
// cancelled them all, and how to give them time.
func noneFinished(r aggregate.Requests) error {
	return fmt.Errorf("no request finished within the run: all %d were cancelled at its end; lengthen --duration or --drain", r.CancelledAtEnd)
}

// topErrorHint names the most common way requests failed, with its
// message, for the one line a user reads when nothing worked.
func topErrorHint(s aggregate.Summary) string {
	if errs := s.Requests.TopErrors; len(errs) > 0 && errs[0].Message != "" {
		return fmt.Sprintf(" (most as %s: %s)", errs[0].Outcome, errs[0].Message)
	}
	var top string
	var n int64
	for outcome, c := range s.Requests.ByOutcome {
		if c > n || c == n && string(outcome) < top {
			top, n = string(outcome), c
		}
	}
	if top == "" {
		return ""
	}
	return fmt.Sprintf(" (most as %s)", top)
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

// recordedOutcome is outcome for a recording read back (replay, report):
// the same exit code the run that made it gave, its objectives (the
// session's --slo) judged again.
func recordedOutcome(stderr io.Writer, s aggregate.Summary) error {
	var objectives []aggregate.Objective
	if s.Session != nil && s.Session.Load.SLO != "" {
		objs, err := aggregate.ParseSLO(s.Session.Load.SLO)
		if err != nil {
			fmt.Fprintf(stderr, "latscope: warning: the recording's objectives %q are not judged: %v\n", s.Session.Load.SLO, err)
		}
		objectives = objs
	}
	return outcome(stderr, s, objectives, false, nil)
}
