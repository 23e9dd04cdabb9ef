package session

import "errors"

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
