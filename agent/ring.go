package agent

import (
	"fmt"
	"sync"
	"time"

	"github.com/latscope/latscope/event"
)

// RingConfig bounds the replay ring. Whichever bound is reached first
// evicts the oldest events. Zero fields take the defaults.
type RingConfig struct {
	MaxEvents int           // default 10000 (about 50 s of a 200 req/s run)
	MaxAge    time.Duration // default 10 minutes
	MaxBytes  int64         // encoded size; default 32 MiB; the newest event is always kept
}

// The ring's defaults.
const (
	DefaultRingEvents = 10000
	DefaultRingAge    = 10 * time.Minute
	// DefaultRingBytes keeps an agent's whole process within 150 MB of
	// resident memory: the ring's frames, plus the pipeline, the aggregator
	// and the clients' buffers (the soak's agent case measures it). 32 MiB
	// holds 10,000 events of typical chat requests; a run of very long
	// outputs reaches it first.
	DefaultRingBytes = 32 << 20
)

func (c RingConfig) withDefaults() RingConfig {
	if c.MaxEvents <= 0 {
		c.MaxEvents = DefaultRingEvents
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultRingAge
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultRingBytes
	}
	return c
}

// gapConsumer names the consumer in the Loss records the ring sends.
const gapConsumer = "agent-stream"

// readBatch is the most frames one read hands a client.
const readBatch = 256

// ring holds the newest events, already rendered as SSE frames, for every
// client to read at its own cursor. Publishing appends and never waits for a
// reader; the lock is held only to append one frame or to copy a batch of
// slice headers out. Events carry consecutive sequence ids, so finding a
// cursor's place is arithmetic.
type ring struct {
	cfg RingConfig
	now func() time.Time

	mu      sync.Mutex
	entries []entry // entries[start:] hold ids first, first+1, ..., next-1
	start   int
	first   uint64 // id of the oldest event held; equals next when empty
	next    uint64 // id the next event gets; ids start at 1
	bytes   int64
	wake    chan struct{} // closed by the next publish; made by a reader that waits
	ended   bool

	// The session header is kept aside even after it leaves the ring, so a
	// client always learns what it is watching.
	header    []byte // its JSON
	headerSeq uint64
}

type entry struct {
	at    time.Time
	frame []byte
}

func newRing(cfg RingConfig, now func() time.Time) *ring {
	return &ring{cfg: cfg.withDefaults(), now: now, first: 1, next: 1}
}

// publish appends one encoded event and returns its id.
func (r *ring) publish(kind event.Kind, data []byte) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.next
	frame := eventFrame(id, data) // under the lock, so ids follow the ring's order
	r.next++
	r.entries = append(r.entries, entry{at: r.now(), frame: frame})
	r.bytes += int64(len(frame))
	if kind == event.KindSession {
		r.header, r.headerSeq = data, id
	}
	for r.next-r.first > uint64(r.cfg.MaxEvents) || r.bytes > r.cfg.MaxBytes && r.next-r.first > 1 {
		r.dropOldest()
	}
	r.evictAged()
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	return id
}

// end marks the stream finished: readers that have caught up get the end frame.
func (r *ring) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

func (r *ring) evictAged() {
	limit := r.now().Add(-r.cfg.MaxAge)
	for r.first < r.next && r.entries[r.start].at.Before(limit) {
		r.dropOldest()
	}
}

func (r *ring) dropOldest() {
	r.bytes -= int64(len(r.entries[r.start].frame))
	r.entries[r.start] = entry{}
	r.start++
	r.first++
	switch {
	case r.start == len(r.entries):
		r.entries, r.start = r.entries[:0], 0
	case r.start >= 1024 && 2*r.start >= len(r.entries):
		// Shift down so the slice stays within twice the bound.
		n := copy(r.entries, r.entries[r.start:])
		clear(r.entries[n:])
		r.entries, r.start = r.entries[:n], 0
	}
}

// cursor is one client's place in the stream: every event up to last has
// been sent to it or announced to it as lost.
type cursor struct {
	last  uint64
	fresh bool // a new client: it starts at the session's header, with no gap
}

// cursorFor places a client that resumes after lastID, or a new one when
// resume is false. An id this ring never issued (the agent restarted since)
// starts the client afresh.
func (r *ring) cursorFor(lastID uint64, resume bool) cursor {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !resume || lastID >= r.next {
		return cursor{fresh: true}
	}
	return cursor{last: lastID}
}

// frame is one thing to write to a client.
type frame struct {
	b    []byte
	lost int64 // > 0 for a gap record: how many events it announces
	end  bool
}

// read appends what the client at c should get next to dst (at most
// readBatch frames) and advances c. When there is nothing yet, it returns a
// channel that is closed when there may be.
func (r *ring) read(c *cursor, dst []frame) ([]frame, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evictAged()
	if c.fresh {
		dst = r.begin(c, dst)
	} else {
		dst = r.gaps(c, dst)
	}
	for c.last+1 < r.next && len(dst) < readBatch {
		c.last++
		dst = append(dst, frame{b: r.entries[r.start+int(c.last-r.first)].frame})
	}
	if len(dst) > 0 {
		return dst, nil
	}
	if r.ended {
		return append(dst, frame{b: endFrame, end: true}), nil
	}
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	return dst, r.wake
}

// begin places a new client at the current session's header, so it sees
// that session's whole history that the ring still holds. When the header
// has left the ring, it is sent first with the id just before the oldest
// event held, which is where the client's history starts.
func (r *ring) begin(c *cursor, dst []frame) []frame {
	c.fresh = false
	c.last = r.first - 1
	if r.header == nil {
		return dst
	}
	if r.headerSeq >= r.first {
		c.last = r.headerSeq - 1
		return dst
	}
	return append(dst, frame{b: eventFrame(c.last, r.header)})
}

// gaps announces what a resuming client missed that the ring no longer
// holds. The current session's header is never lost: it is sent in its
// place, between the two gaps it splits. Every frame's id is the cursor
// after it, so a client cut off part way through resumes where it was.
func (r *ring) gaps(c *cursor, dst []frame) []frame {
	if c.last+1 >= r.first {
		return dst
	}
	if r.header != nil && c.last < r.headerSeq && r.headerSeq < r.first {
		dst = r.gap(c, r.headerSeq-1, dst)
		dst = append(dst, frame{b: eventFrame(r.headerSeq, r.header)})
		c.last = r.headerSeq
	}
	return r.gap(c, r.first-1, dst)
}

// gap announces the events after c.last up to upTo as lost.
func (r *ring) gap(c *cursor, upTo uint64, dst []frame) []frame {
	if upTo <= c.last {
		return dst
	}
	n := int64(upTo - c.last)
	loss := event.NewLoss(&event.Loss{
		Time: r.now(), Consumer: gapConsumer, Events: n,
		Reason: fmt.Sprintf("the agent's replay ring no longer holds events %d to %d", c.last+1, upTo),
	})
	data, _ := event.Marshal(loss) // cannot fail: a Loss holds only plain fields
	c.last = upTo
	return append(dst, frame{b: eventFrame(upTo, data), lost: n})
}

// ringStats describe what the ring holds.
type ringStats struct {
	Events    int
	Bytes     int64
	FirstID   uint64 // 0 when empty
	LastID    uint64 // 0 before the first event
	Published uint64
	Ended     bool
}

func (r *ring) stats() ringStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ringStats{Events: int(r.next - r.first), Bytes: r.bytes, LastID: r.next - 1, Published: r.next - 1, Ended: r.ended}
	if s.Events > 0 {
		s.FirstID = r.first
	}
	return s
}
