package pipeline

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/event"
)

// Policy says what the fan-out does when a consumer's buffer is full.
type Policy int

const (
	// Lossless consumers get every event: a full buffer makes the fan-out
	// wait, and the time waited is counted (Stats.Blocked). The aggregator
	// and the recorder are lossless.
	Lossless Policy = iota
	// Lossy consumers lose events when they fall behind; the loss is counted
	// and, once there is room again, announced with a Loss event. A screen
	// and a remote viewer are lossy.
	Lossy
)

func (p Policy) String() string {
	if p == Lossy {
		return "lossy"
	}
	return "lossless"
}

// DefaultBufferBytes bounds each subscription's buffer by memory as well as
// by count: a consumer that falls behind holds at most this much in events
// (Event.Size), whatever their size. 8 MiB is 8 requests of 65,536 chunks,
// or thousands of typical ones, so it binds only on huge requests; with the
// five consumers a process has at most, the buffers stay within 40 MiB.
const DefaultBufferBytes = 8 << 20

// byteWaitPoll is how often a lossless publish that waits for bytes (not
// for a slot) looks again: the consumer's receive frees a slot of the
// channel, which a send can wait on, but nothing tells the publisher that
// bytes were freed. It waits only when a consumer is DefaultBufferBytes
// behind, and then it is held up anyway.
const byteWaitPoll = time.Millisecond

// Stats describe one consumer's subscription.
type Stats struct {
	Name      string
	Policy    Policy
	Delivered int64         // events put in its buffer (Loss events included)
	Dropped   int64         // events it lost (lossy only)
	Blocked   time.Duration // time the fan-out waited for it (lossless only)
	Backlog   int           // events in its buffer now
	Capacity  int
	Bytes     int64 // the backlog's Event.Size summed (as of the last publish)
	MaxBytes  int64
}

// Subscription is one consumer's buffer.
type Subscription struct {
	name   string
	policy Policy
	ch     chan event.Event
	done   chan struct{} // closed by Unsubscribe, so a waiting Publish lets go
	once   sync.Once

	// The buffer's bytes: the sizes of the events sent, oldest first, in a
	// ring one longer than the channel (the consumer may take an event
	// between a settle and the send it made room for). The events the
	// consumer has taken are those sent less those still in the channel
	// (only the publisher sends), so no consumer has to report what it took.
	maxBytes int64
	sizes    []int64 // publisher goroutine only
	head, n  int     // publisher goroutine only
	bytes    atomic.Int64

	pending   int64 // lost and not yet announced; publisher goroutine only
	delivered atomic.Int64
	dropped   atomic.Int64
	blocked   atomic.Int64 // ns
}

// Events is the consumer's channel; it is closed after the last event.
func (s *Subscription) Events() <-chan event.Event { return s.ch }

// Stats returns the subscription's counters; safe from any goroutine.
func (s *Subscription) Stats() Stats {
	return Stats{
		Name: s.name, Policy: s.policy,
		Delivered: s.delivered.Load(), Dropped: s.dropped.Load(),
		Blocked: time.Duration(s.blocked.Load()),
		Backlog: len(s.ch), Capacity: cap(s.ch),
		Bytes: s.bytes.Load(), MaxBytes: s.maxBytes,
	}
}

// settle forgets the sizes of the events the consumer has taken.
func (s *Subscription) settle() {
	taken := s.n - len(s.ch)
	if taken <= 0 {
		return
	}
	var freed int64
	for range taken {
		freed += s.sizes[s.head]
		s.head = (s.head + 1) % len(s.sizes)
	}
	s.n -= taken
	s.bytes.Add(-freed)
}

// fits says whether an event of size bytes fits the byte bound now. An
// event larger than the bound on its own fits an empty buffer, so none is
// refused for ever.
func (s *Subscription) fits(size int64) bool {
	s.settle()
	return s.n == 0 || s.bytes.Load()+size <= s.maxBytes
}

// send puts ev in the channel without waiting, and counts its bytes.
func (s *Subscription) send(ev event.Event, size int64) bool {
	select {
	case s.ch <- ev:
	default:
		return false
	}
	s.count(size)
	return true
}

// count notes an event of size bytes put in the channel.
func (s *Subscription) count(size int64) {
	s.sizes[(s.head+s.n)%len(s.sizes)] = size
	s.n++
	s.bytes.Add(size)
}

// Fanout hands every published event to every subscription. Publish and
// Close are called from one goroutine (the pipeline's); Subscribe and Stats
// from any.
type Fanout struct {
	mu     sync.Mutex
	subs   []*Subscription
	closed bool
	now    func() time.Time
}

// NewFanout returns an empty Fanout.
func NewFanout() *Fanout { return &Fanout{now: time.Now} }

// Subscribe adds a consumer with a buffer of size events (at least 1) and
// at most DefaultBufferBytes. Subscribe before the pipeline runs to see
// every event; a subscription made after Close gets a closed channel.
func (f *Fanout) Subscribe(name string, size int, p Policy) *Subscription {
	return f.SubscribeBytes(name, size, DefaultBufferBytes, p)
}

// SubscribeBytes is Subscribe with the buffer bounded by maxBytes of events
// (Event.Size) as well as by size events: whichever is reached first makes
// it full.
func (f *Fanout) SubscribeBytes(name string, size int, maxBytes int64, p Policy) *Subscription {
	size = max(size, 1)
	s := &Subscription{
		name: name, policy: p, ch: make(chan event.Event, size), done: make(chan struct{}),
		maxBytes: max(maxBytes, 1), sizes: make([]int64, size+1),
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(s.ch)
		return s
	}
	f.subs = append(f.subs, s)
	return s
}

// Unsubscribe removes s and closes its channel; a consumer that stops early
// calls it so that a lossless subscription no longer holds up the others.
func (f *Fanout) Unsubscribe(s *Subscription) {
	s.once.Do(func() { close(s.done) })
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, t := range f.subs {
		if t == s {
			f.subs = append(f.subs[:i:i], f.subs[i+1:]...)
			close(s.ch)
			return
		}
	}
}

// Publish hands ev to every subscription under its policy.
func (f *Fanout) Publish(ev event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := ev.Size()
	for _, s := range f.subs {
		if s.policy == Lossy {
			f.offer(s, ev, size)
			continue
		}
		if !(s.fits(size) && s.send(ev, size)) && !f.wait(s, ev, size) {
			continue
		}
		s.delivered.Add(1)
	}
}

// wait puts ev in a lossless subscription's full buffer once the consumer
// has taken enough, and counts the time waited. It returns false if the
// consumer unsubscribed meanwhile.
func (f *Fanout) wait(s *Subscription, ev event.Event, size int64) bool {
	t := f.now()
	defer func() { s.blocked.Add(int64(f.now().Sub(t))) }()
	var poll *time.Ticker
	for !s.fits(size) {
		if poll == nil {
			poll = time.NewTicker(byteWaitPoll)
			defer poll.Stop()
		}
		select {
		case <-poll.C:
		case <-s.done:
			return false
		}
	}
	// There are bytes to spare: wait for a slot, which a send can do.
	select {
	case s.ch <- ev:
	case <-s.done:
		return false
	}
	s.count(size)
	return true
}

// offer gives ev to a lossy subscription without waiting, announcing earlier
// losses first.
func (f *Fanout) offer(s *Subscription, ev event.Event, size int64) {
	if s.pending > 0 {
		loss := event.NewLoss(&event.Loss{Time: ev.Time(), Consumer: s.name, Events: s.pending, Reason: "consumer fell behind"})
		if lsize := loss.Size(); !s.fits(lsize) || !s.send(loss, lsize) {
			s.pending++
			s.dropped.Add(1)
			return
		}
		s.delivered.Add(1)
		s.pending = 0
	}
	if s.fits(size) && s.send(ev, size) {
		s.delivered.Add(1)
		return
	}
	s.pending++
	s.dropped.Add(1)
}

// Close closes every subscription's channel. Publish must not be called after.
func (f *Fanout) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for _, s := range f.subs {
		close(s.ch)
	}
	f.subs = nil
}

// Stats returns every current subscription's counters.
func (f *Fanout) Stats() []Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Stats, 0, len(f.subs))
	for _, s := range f.subs {
		out = append(out, s.Stats())
	}
	return out
}
