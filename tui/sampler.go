package tui

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// DefaultKeep is how many requests a Sampler keeps per list by default.
const DefaultKeep = 20

// RequestSample is what the requests view lists: the latest finished
// requests, and the slowest of each window. The records are shared, not
// copied: a request record is never changed once it is emitted.
type RequestSample struct {
	Latest  []*event.Request                       // newest first
	Slowest [aggregate.NumWindows][]*event.Request // slowest first, by rank (see Sampler)
}

// Sampler keeps a bounded sample of finished requests for the requests
// view: the latest N, and the slowest N of each window, ranked by TTFT (a
// request that never got a first token ranks by its E2E, a lower bound of
// the TTFT it would have had). It holds at most N requests per time slot,
// whatever the request rate: its windows are rings of slots like the
// aggregator's (1 s slots for 10 s, 10 s slots for 1 and 5 minutes), so a
// request counts in the window that holds its completion. Safe for
// concurrent use.
type Sampler struct {
	mu      sync.Mutex
	keep    int
	latest  []*event.Request // ring
	next    int
	version uint64
	fine    slotRing
	coarse  slotRing
	run     topN
}

// NewSampler returns a Sampler keeping keep requests per list (DefaultKeep
// when keep ≤ 0).
func NewSampler(keep int) *Sampler {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Sampler{
		keep:   keep,
		latest: make([]*event.Request, 0, keep),
		fine:   newSlotRing(time.Second, 10, keep),
		coarse: newSlotRing(10*time.Second, 30, keep),
		run:    topN{keep: keep},
	}
}

// Add takes one finished request. Warm-up requests are ignored. It does not
// copy r, which must not change afterwards.
func (s *Sampler) Add(r *event.Request) {
	if r == nil || r.Warmup {
		return
	}
	end, key := r.EndedAt(), rank(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	if len(s.latest) < s.keep {
		s.latest = append(s.latest, r)
	} else {
		s.latest[s.next] = r
		s.next = (s.next + 1) % s.keep
	}
	s.run.offer(key, r)
	if t := s.fine.slot(end); t != nil {
		t.offer(key, r)
	}
	if t := s.coarse.slot(end); t != nil {
		t.offer(key, r)
	}
}

// Version changes whenever a request is added.
func (s *Sampler) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Sample returns the lists, with windows ending at now (a snapshot's Now).
func (s *Sampler) Sample(now time.Time) RequestSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out RequestSample
	out.Latest = make([]*event.Request, 0, len(s.latest))
	for i := len(s.latest) - 1; i >= 0; i-- {
		out.Latest = append(out.Latest, s.latest[(s.next+i)%len(s.latest)])
	}
	var buf []ranked
	for w := aggregate.Window(0); w < aggregate.NumWindows; w++ {
		buf = buf[:0]
		switch w {
		case aggregate.Win10s:
			buf = s.fine.collect(buf, now, 10)
		case aggregate.Win1m:
			buf = s.coarse.collect(buf, now, 6)
		case aggregate.Win5m:
			buf = s.coarse.collect(buf, now, 30)
		default:
			buf = append(buf, s.run.items...)
		}
		out.Slowest[w] = slowest(buf, s.keep)
	}
	return out
}

func slowest(items []ranked, n int) []*event.Request {
	slices.SortFunc(items, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.key, a.key), strings.Compare(a.r.ID, b.r.ID))
	})
	out := make([]*event.Request, 0, min(n, len(items)))
	for _, it := range items[:min(n, len(items))] {
		out = append(out, it.r)
	}
	return out
}

// rank is what "slowest" sorts by: the TTFT, else the E2E of a request that
// never got a first token.
func rank(r *event.Request) time.Duration {
	if r.TTFT > 0 {
		return r.TTFT
	}
	return r.E2E
}

type ranked struct {
	key time.Duration
	r   *event.Request
}

// topN keeps the keep highest-ranked requests offered, as a min-heap so a
// request that does not make it costs one comparison.
type topN struct {
	keep  int
	items []ranked
}

func (t *topN) reset() { clear(t.items); t.items = t.items[:0] }

func (t *topN) offer(key time.Duration, r *event.Request) {
	if len(t.items) < t.keep {
		t.items = append(t.items, ranked{key, r})
		for i := len(t.items) - 1; i > 0; {
			p := (i - 1) / 2
			if t.items[p].key <= t.items[i].key {
				break
			}
			t.items[p], t.items[i] = t.items[i], t.items[p]
			i = p
		}
		return
	}
	if key <= t.items[0].key {
		return
	}
	t.items[0] = ranked{key, r}
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(t.items) && t.items[l].key < t.items[small].key {
			small = l
		}
		if l+1 < len(t.items) && t.items[l+1].key < t.items[small].key {
			small = l + 1
		}
		if small == i {
			return
		}
		t.items[small], t.items[i] = t.items[i], t.items[small]
		i = small
	}
}

// slotRing is a ring of time slots, each keeping its slowest requests.
type slotRing struct {
	width  int64 // ns
	epochs []int64
	slots  []topN
}

func newSlotRing(width time.Duration, n, keep int) slotRing {
	r := slotRing{width: int64(width), epochs: make([]int64, n), slots: make([]topN, n)}
	for i := range r.slots {
		r.epochs[i] = -1 << 63
		r.slots[i] = topN{keep: keep, items: make([]ranked, 0, keep)}
	}
	return r
}

func (r *slotRing) epoch(t time.Time) int64 {
	ns := t.UnixNano()
	e := ns / r.width
	if ns%r.width < 0 {
		e--
	}
	return e
}

// slot returns t's slot, reset if it held an older one, or nil when t is
// older than what the slot holds now.
func (r *slotRing) slot(t time.Time) *topN {
	if t.IsZero() {
		return nil
	}
	e := r.epoch(t)
	i := int(e % int64(len(r.slots)))
	if i < 0 {
		i += len(r.slots)
	}
	switch {
	case r.epochs[i] == e:
	case r.epochs[i] > e:
		return nil
	default:
		r.slots[i].reset()
		r.epochs[i] = e
	}
	return &r.slots[i]
}

// collect appends the requests of the n slots ending with now's.
func (r *slotRing) collect(dst []ranked, now time.Time, n int) []ranked {
	to := r.epoch(now)
	from := to - int64(n) + 1
	for i, e := range r.epochs {
		if e >= from && e <= to {
			dst = append(dst, r.slots[i].items...)
		}
	}
	return dst
}
