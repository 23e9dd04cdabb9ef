package pipeline

import "errors"

// ErrRunEnded is the cause with which a run's own end cancels a source's
// context (context.WithCancelCause): its duration over, a sweep's step
// decided, its user quitting the dashboard. A source then counts what it
// cuts short as ended with the run, not as failed (the probe marks its
// requests in flight RunEnded). It lives here, with Source, so that the
// code that ends runs (the sweep, the dashboard) and the sources share it
// without importing each other.
var ErrRunEnded = errors.New("the run ended")
