package agent

import (
	"math/rand/v2"
	"time"
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
	d := b.Initial
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d/2 + rand.N(d/2+1)
}
