// Package backoff is the one capped exponential back-off with jitter that
// latscope's retry loops share (the probe's closed-loop workers after a
// refused connection, the attach client after a dropped one): the pause
// after the n-th failure in a row grows from First, doubling, up to Max,
// and is drawn between half and all of that ceiling, so that many clients
// that failed together do not all come back at once.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is a capped exponential back-off.
type Policy struct {
	First time.Duration // the ceiling after the first failure in a row
	Max   time.Duration // the ceiling never grows past this
}

// Ceiling is min(Max, First × 2^(n-1)), the longest pause after the n-th
// failure in a row; 0 when n < 1 or First ≤ 0.
func (p Policy) Ceiling(n int) time.Duration {
	if n < 1 || p.First <= 0 {
		return 0
	}
	d := p.First
	// Doubling stops at Max, so this runs at most log2(Max/First) times
	// however long the streak, and never overflows.
	for i := 1; i < n && d < p.Max; i++ {
		if d > p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

// Delay is the pause after the n-th failure in a row: half of Ceiling(n)
// fixed, the other half random, drawn from rng (math/rand/v2's global
// source when rng is nil; a seeded rng makes the pauses reproducible).
func (p Policy) Delay(n int, rng *rand.Rand) time.Duration {
	d := p.Ceiling(n)
	if d <= 0 {
		return 0
	}
	half := int64(d / 2)
	if rng == nil {
		return d/2 + time.Duration(rand.Int64N(half+1))
	}
	return d/2 + time.Duration(rng.Int64N(half+1))
}
