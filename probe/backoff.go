package probe

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/backoff"
)

// A closed-loop worker pauses before its next request in two cases:
//
//   - after a request that could not connect (outcome connect), for a
//     capped exponential back-off with jitter, reset once a request reaches
//     the server, so a refused port is not hammered thousands of times a
//     second;
//   - after a 429 or 503 that carried Retry-After, for as long as it asked
//     (at most MaxRetryAfter).
//
// The pause lies between two requests: the next one starts, and counts its
// latency, after it, so no request's latency includes a pause. The open
// loop never pauses: its schedule is the experiment, and holding requests
// back would hide the very overload it measures (every request still
// counts from its intended time, and a 429 is recorded as an error).
const (
	BackoffFirst  = 50 * time.Millisecond // pause after the first connection error
	BackoffMax    = 5 * time.Second       // longest pause after connection errors
	MaxRetryAfter = time.Minute           // longest Retry-After honoured
)

// notes is what a request tells the load generator beyond its record.
type notes struct {
	retryAfter  time.Duration // the Retry-After of a 429 or 503; 0 when none
	reconnected bool          // sent again on a fresh connection after a stale one
	answer      string        // the answer's text, with RequestSpec.KeepAnswer
}

// notingDoer is a Doer that also returns its notes. Client implements it.
type notingDoer interface {
	doNoted(ctx context.Context, spec RequestSpec) (*event.Request, notes)
}

// workerPauses is one closed-loop worker's pause policy. It is not safe for
// concurrent use: each worker has its own.
type workerPauses struct {
	streak int // connection errors in a row
	rng    *rand.Rand
}

func newBackoff(seed int64, worker int) *workerPauses {
	return &workerPauses{rng: rand.New(rand.NewPCG(uint64(seed), uint64(worker)+0xbac0ff))}
}

// pauseAfter returns how long to wait after a request that ended with out
// (and, for a 429 or 503, a Retry-After of retryAfter); 0 means none.
func (b *workerPauses) pauseAfter(out event.Outcome, retryAfter time.Duration) time.Duration {
	if out != event.OutcomeConnect {
		b.streak = 0
		return min(retryAfter, MaxRetryAfter)
	}
	b.streak++
	// Half fixed, half random: workers that failed together spread out.
	return backoff.Policy{First: BackoffFirst, Max: BackoffMax}.Delay(b.streak, b.rng)
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// parseRetryAfter reads a Retry-After header, in delay-seconds or as an
// HTTP date (relative to now); 0 when absent, past or unreadable, and at
// most MaxRetryAfter.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err == nil && secs >= int64(MaxRetryAfter/time.Second), errors.Is(err, strconv.ErrRange) && v[0] != '-':
		return MaxRetryAfter
	case err == nil:
		return time.Duration(max(secs, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), MaxRetryAfter)
	}
	return 0
}
