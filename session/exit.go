package session

import (
	"context"
	"errors"
)

// Reason is why a run ended other than well: the command line turns it
// into its exit code (the one table is in cmd/latscope).
type Reason int

// The reasons a run ends other than well.
const (
	Failed      Reason = iota + 1 // bad options, nothing reached or set up, a write failed, a bench target missed
	SLOMissed                     // at least one objective was missed
	AllFailed                     // requests were sent and none succeeded (every one that finished failed, or none finished)
	Interrupted                   // a signal ended the run; the summary so far was printed
)

// ExitError is an error that says why the run ended: its message is the
// wrapped error's.
type ExitError struct {
	Reason Reason
	Err    error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit wraps err with why the run ended.
func Exit(reason Reason, err error) error { return &ExitError{Reason: reason, Err: err} }

// ReasonOf is the reason err carries, or 0 when it carries none.
func ReasonOf(err error) Reason {
	var e *ExitError
	if errors.As(err, &e) {
		return e.Reason
	}
	return 0
}

// WithoutCancellation removes what an interruption leaves among a command's
// errors (cancelled contexts), keeping real failures.
func WithoutCancellation(err error) error {
	return DropErrors(err, func(e error) bool {
		if _, joined := e.(interface{ Unwrap() []error }); joined {
			return false // look into it: a real failure may be joined to a cancellation
		}
		return errors.Is(e, context.Canceled) || errors.Is(e, ErrSetupInterrupted)
	})
}

// DropErrors returns err without the errors drop matches: err itself, or
// any of the errors it joins, however deep.
func DropErrors(err error, drop func(error) bool) error {
	if err == nil || drop(err) {
		return nil
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var rest []error
	for _, e := range joined.Unwrap() {
		if e = DropErrors(e, drop); e != nil {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}
