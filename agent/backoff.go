package agent

import (
	"time"

	"github.com/latscope/latscope/internal/backoff"
)

// Backoff is capped exponential backoff with jitter: the n-th failed
// connection in a row waits a random time between half and all of
// min(Max, Initial × 2^(n-1)), so that many clients of a restarted agent do
// not all come back at once.
type Backoff struct {
	Initial time.Duration // default 250 ms
	Max     time.Duration // default 15 s
}

func (b Backoff) delay(attempt int) time.Duration {
	return backoff.Policy{First: b.Initial, Max: b.Max}.Delay(attempt, nil)
}
