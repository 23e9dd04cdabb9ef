package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/latscope/latscope/aggregate"
)

// Exit codes, documented in the README and in `latscope --help`.
const (
	exitFailure     = 1   // bad flags, the server could not be reached or set up, a write failed
	exitSLOMissed   = 2   // --slo: at least one objective was missed
	exitAllFailed   = 3   // requests were sent and none succeeded
	exitInterrupted = 130 // Ctrl-C or SIGTERM: the summary so far was printed
)

// runSession measures target with f and prints the result: the composition
// root opens the session, measures it, prints the summary and decides the
// exit code.
func runSession(ctx context.Context, stdout, stderr io.Writer, target string, f *loadFlags, extra *sessionExtras) error {
	objectives, err := aggregate.ParseSLO(f.slo)
	if err != nil {
		return err
	}
	if !f.noTUI {
		fmt.Fprintln(stderr, "latscope: the live dashboard is not built yet; running headless (--no-tui)")
	}
	s, err := openSession(ctx, stderr, target, f, extra)
	if errors.Is(err, errInterrupted) {
		return &exitError{code: exitInterrupted, err: err}
	}
	if err != nil {
		return err
	}
	defer s.Close()
	summary, runErr := s.measure(ctx, stderr)
	if f.jsonOut {
		err = aggregate.WriteJSON(stdout, summary)
	} else {
		err = aggregate.WriteTable(stdout, summary)
	}
	if err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	return outcome(ctx, stderr, summary, objectives, runErr)
}

// outcome maps a finished run to its exit: an error of the run itself, an
// interruption, no request succeeding, or a missed objective, in that order.
func outcome(ctx context.Context, stderr io.Writer, s aggregate.Summary, objectives []aggregate.Objective, runErr error) error {
	switch {
	case runErr != nil && ctx.Err() == nil:
		return runErr
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: errors.New("interrupted: the summary covers the requests sent until then")}
	case s.Requests.Sent > 0 && s.Requests.OK == 0:
		return &exitError{code: exitAllFailed, err: fmt.Errorf("all %d requests failed%s", s.Requests.Sent, topErrorHint(s))}
	case len(objectives) > 0:
		return checkSLO(stderr, s, objectives)
	}
	return nil
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
