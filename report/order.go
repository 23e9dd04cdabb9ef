package report

import (
	"container/heap"
	"time"

	"github.com/latscope/latscope/event"
)

// A recording holds events in the order they were recorded, which is not
// the order of the times the aggregator files them under: a request is
// recorded when it ends (after its server span has been joined) and filed at
// its completion, a marker may be raised after the moment it describes.
// Windows and snapshots are only right when the aggregator gets events in
// time order, so the report reads a recording twice: the first pass measures
// how far any event lags behind the latest time already seen (the lateness),
// the second holds back events in a heap until nothing later in the file can
// come before them. The heap holds only the events within that lateness, not
// the whole file.

// eventTime is the time the aggregator files ev under: a request at its
// completion (intended send + E2E, or its start when it has no E2E), any
// other event at its own time.
func eventTime(ev event.Event) time.Time {
	if ev.Request != nil {
		return ev.Request.EndedAt()
	}
	return ev.Time()
}

// orderClock assigns each event, in file order, the time it is ordered by.
// An event without a time is ordered at the latest time seen so far, which
// keeps it where the file put it. Both passes use one, so they agree.
type orderClock struct {
	latest time.Time
}

func (c *orderClock) key(ev event.Event) time.Time {
	t := eventTime(ev)
	if t.IsZero() {
		return c.latest
	}
	if t.After(c.latest) {
		c.latest = t
	}
	return t
}

// pending is an event held back until it is its turn.
type pending struct {
	at  time.Time
	seq int64 // file position: ties keep the file's order
	ev  event.Event
}

type pendingHeap []pending

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}

// reorderer releases events in time order, given the lateness measured by
// the first pass: every event still to come is at most lateness older than
// the latest time seen, so anything at or before latest − lateness is safe.
type reorderer struct {
	lateness time.Duration
	clock    orderClock
	seq      int64
	held     pendingHeap
	release  func(at time.Time, ev event.Event)
}

func (r *reorderer) add(ev event.Event) {
	at := r.clock.key(ev)
	heap.Push(&r.held, pending{at: at, seq: r.seq, ev: ev})
	r.seq++
	safe := r.clock.latest.Add(-r.lateness)
	for len(r.held) > 0 && !r.held[0].at.After(safe) {
		p := heap.Pop(&r.held).(pending)
		r.release(p.at, p.ev)
	}
}

// flush releases everything still held, at the end of the file.
func (r *reorderer) flush() {
	for len(r.held) > 0 {
		p := heap.Pop(&r.held).(pending)
		r.release(p.at, p.ev)
	}
}
