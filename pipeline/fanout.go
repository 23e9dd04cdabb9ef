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

// Stats describe one consumer's subscription.
type Stats struct {
	Name      string
	Policy    Policy
	Delivered int64         // events put in its buffer (Loss events included)
	Dropped   int64         // events it lost (lossy only)
	Blocked   time.Duration // time the fan-out waited for it (lossless only)
	Backlog   int           // events in its buffer now
	Capacity  int
}

// Subscription is one consumer's buffer.
type Subscription struct {
	name   string
	policy Policy
	ch     chan event.Event
	done   chan struct{} // closed by Unsubscribe, so a waiting Publish lets go
	once   sync.Once

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
	}
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

// Subscribe adds a consumer with a buffer of size events (at least 1).
// Subscribe before the pipeline runs to see every event; a subscription
// made after Close gets a closed channel.
func (f *Fanout) Subscribe(name string, size int, p Policy) *Subscription {
	s := &Subscription{name: name, policy: p, ch: make(chan event.Event, max(size, 1)), done: make(chan struct{})}
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
	for _, s := range f.subs {
		if s.policy == Lossy {
			f.offer(s, ev)
			continue
		}
		select {
		case s.ch <- ev:
		default:
			t := f.now()
			select {
			case s.ch <- ev:
			case <-s.done:
				continue
			}
			s.blocked.Add(int64(f.now().Sub(t)))
		}
		s.delivered.Add(1)
	}
}

// offer gives ev to a lossy subscription without waiting, announcing earlier
// losses first.
func (f *Fanout) offer(s *Subscription, ev event.Event) {
	if s.pending > 0 {
		loss := event.NewLoss(&event.Loss{Time: ev.Time(), Consumer: s.name, Events: s.pending, Reason: "consumer fell behind"})
		select {
		case s.ch <- loss:
			s.delivered.Add(1)
			s.pending = 0
		default:
			s.pending++
			s.dropped.Add(1)
			return
		}
	}
	select {
	case s.ch <- ev:
		s.delivered.Add(1)
	default:
		s.pending++
		s.dropped.Add(1)
	}
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
