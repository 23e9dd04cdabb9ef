package session

import (
	"errors"
	"fmt"
	"io"

	"github.com/latscope/latscope/aggregate"
)

// Outcome maps a finished run to why it ended: an interruption, an error
// of the run itself, no request succeeding, or a missed objective (each
// objective's result written on w), in that order; nil for a run that
// went well.
func Outcome(w io.Writer, s aggregate.Summary, objectives []aggregate.Objective, interrupted bool, runErr error) error {
	switch {
	case interrupted:
		return Exit(Interrupted, errors.New("interrupted: the summary covers the requests sent until then"))
	case runErr != nil:
		return runErr
	case s.Requests.Errors > 0 && s.Requests.OK == 0:
		// Requests the run's own end cancelled (quitting the dashboard,
		// --duration and --drain) did not fail; all the others did.
		return Exit(AllFailed, AllRequestsFailed(s))
	case s.Requests.CancelledAtEnd > 0 && s.Requests.OK == 0:
		// None failed, but none succeeded either: the run measured
		// nothing, which is no success (a queue deeper than the run).
		return Exit(AllFailed, noneFinished(s.Requests))
	case len(objectives) > 0:
		return CheckSLO(w, s, objectives)
	}
	return nil
}

// RecordedOutcome is Outcome for a recording read back (replay, report):
// why the run that made it ended, its objectives (the session's --slo)
// judged again.
func RecordedOutcome(w io.Writer, s aggregate.Summary) error {
	var objectives []aggregate.Objective
	if s.Session != nil && s.Session.Load.SLO != "" {
		objs, err := aggregate.ParseSLO(s.Session.Load.SLO)
		if err != nil {
			fmt.Fprintf(w, "latscope: warning: the recording's objectives %q are not judged: %v\n", s.Session.Load.SLO, err)
		}
		objectives = objs
	}
	return Outcome(w, s, objectives, false, nil)
}

// CheckSLO writes each objective's result on w and fails (SLOMissed) when
// any is missed, for CI users.
func CheckSLO(w io.Writer, s aggregate.Summary, objectives []aggregate.Objective) error {
	failed := 0
	for _, r := range aggregate.Evaluate(s, objectives) {
		mark := "ok  "
		if !r.Pass {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "slo %s %s%s (got %s)\n", mark, r.Metric, r.Want, r.GotText)
	}
	if failed > 0 {
		return Exit(SLOMissed, fmt.Errorf("%d of %d objectives missed", failed, len(objectives)))
	}
	return nil
}

// AllRequestsFailed says that every request that finished failed, and how
// most did; those the run's end cancelled are named apart.
func AllRequestsFailed(s aggregate.Summary) error {
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
