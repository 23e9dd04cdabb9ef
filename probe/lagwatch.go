package probe

import (
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/event"
)

// Watching the probe's own scheduling lag costs wake-ups: a check every
// 5 ms is 200 a second, whether anything is read or not, and at one
// stream it was two thirds of the probe's CPU. Where a stream's socket
// gives the kernel's receive time of what it reads (arrival.go), its reads
// are the watch instead: a read that returns more than lateBy after its
// bytes arrived is a stretch in which the probe ran late, and nothing else
// such a stream measures can be held up by the probe (its times are the
// kernel's). So the timed checks run only while a request is in flight
// whose connection is not known to be stamped: before its headers, or on
// a socket without kernel times (not Linux, a wrapped connection).

// lagWatch is what the requests of a run tell the lag watcher: how many
// are in flight unstamped, and the late stretches their reads saw.
type lagWatch struct {
	unstamped atomic.Int64
	changed   chan struct{}      // a nudge when unstamped may have crossed zero
	stretches chan event.Stretch // late stretches the reads saw
	dropped   atomic.Int64       // stretches lost to a full channel
}

// lagStretchBuffer bounds the stretches waiting for the watcher: the
// emitter keeps the latest few per sample anyway (maxLate).
const lagStretchBuffer = 64

func newLagWatch() *lagWatch {
	return &lagWatch{changed: make(chan struct{}, 1), stretches: make(chan event.Stretch, lagStretchBuffer)}
}

func (w *lagWatch) nudge() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// begin counts a request as in flight unstamped until its end or until
// its reads prove stamped.
func (w *lagWatch) begin() *lagRequest {
	if w == nil {
		return nil
	}
	lr := &lagRequest{w: w}
	lr.counted.Store(true)
	if w.unstamped.Add(1) == 1 {
		w.nudge()
	}
	return lr
}

// lagRequest is one request's share of the watch.
type lagRequest struct {
	w       *lagWatch
	counted atomic.Bool
}

// end takes the request out of the count if it still is in it.
func (lr *lagRequest) end() {
	if lr != nil && lr.counted.CompareAndSwap(true, false) && lr.w.unstamped.Add(-1) == 0 {
		lr.w.nudge()
	}
}

// read notes a read that returned at now the bytes that reached the host
// at `at`, by the kernel's clock when stamped: once the connection is
// known to keep kernel receive times, the request leaves the timed checks'
// count, and a read late on its bytes' arrival is a late stretch.
func (lr *lagRequest) read(at, now time.Time, stamped bool) {
	if lr == nil || !stamped {
		return
	}
	lr.end()
	if now.Sub(at) > lateBy {
		select {
		case lr.w.stretches <- event.Stretch{From: at, To: now}:
		default:
			lr.w.dropped.Add(1)
		}
	}
}
