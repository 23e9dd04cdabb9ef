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
	// Decode holds the decode numbers of the listed requests whose token
	// times the Sampler thinned (see sampleChunks), taken from all of them.
	Decode map[*event.Request]decodeSummary
}

// sampleChunks bounds the chunks a sampled request keeps. The lists hold up
// to about 42 × keep requests (the latest, and the slowest of each slot of
// the 10 s and 5 min rings and of the run); kept whole, a 65,536-token
// stream is 1 MB of chunks, and the 5-minute ring alone grew the dashboard
// by ~80 MB over five minutes of 8,192-token outputs. Thinned to the first
// and last chunk of sampleChunks/2 equal stretches of the decode, a request
// still draws its token ticks at any screen width (a stretch is narrower
// than a cell), and its decode numbers are taken from every chunk before
// thinning.
const sampleChunks = 1024

// decodeSummary is what the waterfall says of a decode: the median and
// worst gap between content chunks, and where the worst one ended.
type decodeSummary struct {
	chunks     int           // content chunks before thinning
	p50, worst time.Duration // ITL median and maximum
	worstAt    int           // index of the chunk that ended the worst gap
	worstEnd   time.Duration // and its arrival (offset from Start)
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
	latest  []ranked // ring
	next    int
	version uint64
	fine    slotRing
	coarse  slotRing
	run     topN
	// newestEnd is the latest end of a request added: the lists' windows
	// reach it even when the snapshot they are drawn with is older.
	newestEnd time.Time
}

// NewSampler returns a Sampler keeping keep requests per list (DefaultKeep
// when keep ≤ 0).
func NewSampler(keep int) *Sampler {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Sampler{
		keep:   keep,
		latest: make([]ranked, 0, keep),
		fine:   newSlotRing(fineSlot, slotsOf(aggregate.Win10s, fineSlot), keep),
		coarse: newSlotRing(coarseSlot, slotsOf(aggregate.Win5m, coarseSlot), keep),
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
	// A thinned request's decode summary travels with it in every list, so
	// nothing holds a request (16 KB thinned) that no list holds: a map of
	// summaries beside the lists kept up to 860 of them alive, and the
	// dashboard's heap grew for as long as the map took to fill.
	it := ranked{key: key}
	if thinned, sum, ok := thin(r); ok {
		it.r, it.sum = thinned, &sum
	} else {
		it.r = r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	if end.After(s.newestEnd) {
		s.newestEnd = end
	}
	if len(s.latest) < s.keep {
		s.latest = append(s.latest, it)
	} else {
		s.latest[s.next] = it
		s.next = (s.next + 1) % s.keep
	}
	s.run.offerRanked(it)
	if t := s.fine.slot(end); t != nil {
		t.offerRanked(it)
	}
	if e := s.coarse.epoch(end); e > s.coarse.newest && s.coarse.newest != noEpoch {
		// A new coarse slot begins: what the older slots hold that can
		// never again be listed goes (see pruneOutranked).
		s.coarse.pruneOutranked(s.keep)
	}
	if t := s.coarse.slot(end); t != nil {
		t.offerRanked(it)
	}
}

// thin returns r, or when it has more than sampleChunks chunks a copy with
// its chunks thinned (see sampleChunks) and the summary of all of them.
func thin(r *event.Request) (*event.Request, decodeSummary, bool) {
	n := len(r.Chunks)
	if n <= sampleChunks {
		return r, decodeSummary{}, false
	}
	sum := summarize(r)
	c := *r
	first, last := r.Chunks[0].At, r.Chunks[n-1].At
	stretches := int64(sampleChunks / 2)
	span := max(int64(last-first), 1)
	c.Chunks = make([]event.Chunk, 0, sampleChunks)
	prev := int64(-1)
	for i, ch := range r.Chunks {
		b := min(int64(ch.At-first)*stretches/span, stretches-1)
		// The first chunk of a stretch, and the last (the one before the
		// next stretch's first).
		if b != prev || i == n-1 || min(int64(r.Chunks[i+1].At-first)*stretches/span, stretches-1) != b {
			c.Chunks = append(c.Chunks, ch)
		}
		prev = b
	}
	return &c, sum, true
}

// summarize takes the decode numbers of r from all its chunks.
func summarize(r *event.Request) decodeSummary {
	itl := r.ITLs()
	sum := decodeSummary{chunks: len(r.Chunks)}
	for i, g := range itl {
		if g > sum.worst {
			sum.worst, sum.worstAt, sum.worstEnd = g, i+1, r.Chunks[i+1].At
		}
	}
	if len(itl) > 0 {
		slices.Sort(itl)
		sum.p50 = itl[len(itl)/2]
	}
	return sum
}

// Version changes whenever a request is added.
func (s *Sampler) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Sample returns the lists, with windows ending at now (a snapshot's Now)
// or at the newest request's end if that is later. The snapshot is taken a
// little less often than requests arrive: windows that ended at its Now
// left out the newest requests, which the latest list showed, so a request
// slower than rows of the slowest list could be missing from it.
func (s *Sampler) Sample(now time.Time) RequestSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.newestEnd.After(now) {
		now = s.newestEnd
	}
	var out RequestSample
	newest := make([]ranked, 0, len(s.latest))
	for i := len(s.latest) - 1; i >= 0; i-- {
		newest = append(newest, s.latest[(s.next+i)%len(s.latest)])
	}
	out.Latest = out.listed(newest)
	var buf []ranked
	for w := aggregate.Window(0); w < aggregate.NumWindows; w++ {
		buf = buf[:0]
		switch w {
		case aggregate.Win10s:
			buf = s.fine.collect(buf, now, slotsOf(w, fineSlot))
		case aggregate.Win1m, aggregate.Win5m:
			buf = s.coarse.collect(buf, now, slotsOf(w, coarseSlot))
		default:
			buf = append(buf, s.run.items...)
		}
		out.Slowest[w] = out.listed(slowest(buf, s.keep))
	}
	return out
}

// listed returns items' requests, and notes the decode summaries of the
// thinned ones in Decode.
func (out *RequestSample) listed(items []ranked) []*event.Request {
	list := make([]*event.Request, 0, len(items))
	for _, it := range items {
		list = append(list, it.r)
		if it.sum != nil {
			if out.Decode == nil {
				out.Decode = map[*event.Request]decodeSummary{}
			}
			out.Decode[it.r] = *it.sum
		}
	}
	return list
}

// slowest sorts items slowest first and returns the first n.
func slowest(items []ranked, n int) []ranked {
	slices.SortFunc(items, slowerFirst)
	return items[:min(n, len(items))]
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
	sum *decodeSummary // the decode of all r's chunks when r is thinned; else nil
}

// slowerFirst is the order of the slowest lists: rank descending, then the
// newer first (a newer request outlives an older one in every window, so
// ties never keep an older one alive: see pruneOutranked), then ID.
func slowerFirst(a, b ranked) int {
	return cmp.Or(cmp.Compare(b.key, a.key), b.r.EndedAt().Compare(a.r.EndedAt()), strings.Compare(a.r.ID, b.r.ID))
}

// topN keeps the keep highest-ranked requests offered, as a min-heap so a
// request that does not make it costs one comparison.
type topN struct {
	keep  int
	items []ranked
}

func (t *topN) reset() { clear(t.items); t.items = t.items[:0] }

// offerRanked keeps it if it is among the keep slowest offered. The heap's
// root is the least slow item held, in the order of the lists (slowerFirst),
// so ties on rank are decided as the lists decide them.
func (t *topN) offerRanked(it ranked) {
	if len(t.items) < t.keep {
		t.items = append(t.items, it)
		t.up(len(t.items) - 1)
		return
	}
	if slowerFirst(it, t.items[0]) >= 0 {
		return
	}
	t.items[0] = it
	t.down(0)
}

// lessSlow says whether item i would be listed after item j.
func (t *topN) lessSlow(i, j int) bool { return slowerFirst(t.items[i], t.items[j]) > 0 }

func (t *topN) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.lessSlow(i, p) {
			return
		}
		t.items[p], t.items[i] = t.items[i], t.items[p]
		i = p
	}
}

func (t *topN) down(i int) {
	for {
		l, least := 2*i+1, i
		if l < len(t.items) && t.lessSlow(l, least) {
			least = l
		}
		if l+1 < len(t.items) && t.lessSlow(l+1, least) {
			least = l + 1
		}
		if least == i {
			return
		}
		t.items[least], t.items[i] = t.items[i], t.items[least]
		i = least
	}
}

// heapify restores the heap after items were removed.
func (t *topN) heapify() {
	for i := len(t.items)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
}

// The sampler's slot widths: the aggregator's, so its windows hold the
// requests aggregate's windows count.
const (
	fineSlot   = time.Second
	coarseSlot = 10 * time.Second
)

// slotsOf is how many slots of width make window w (aggregate's span).
func slotsOf(w aggregate.Window, width time.Duration) int { return int(w.Span() / width) }

// slotRing is a ring of time slots, each keeping its slowest requests.
type slotRing struct {
	width  int64 // ns
	epochs []int64
	slots  []topN
	newest int64 // the newest epoch a slot holds; noEpoch before the first
}

const noEpoch = -1 << 63

func newSlotRing(width time.Duration, n, keep int) slotRing {
	r := slotRing{width: int64(width), epochs: make([]int64, n), slots: make([]topN, n), newest: noEpoch}
	for i := range r.slots {
		r.epochs[i] = noEpoch
		r.slots[i] = topN{keep: keep, items: make([]ranked, 0, keep)}
	}
	return r
}

// pruneOutranked drops from the older slots every request that at least
// keep requests of newer slots outrank. Every window of the requests view
// ends at the present, so a window that holds such a request holds those
// newer ones too and it can never again be among the window's keep slowest;
// the lists stay exactly what they were. Without it, the 5-minute ring kept
// keep requests in each of its 30 slots (600 with their token times, ~10 MB
// for long outputs), filling for five minutes; with it, a ring of requests
// in random order keeps about keep × (1 + ln 30) of them. The newest slot
// does not count against the others, so a window ending one slot before it
// (a snapshot a little behind the newest request) stays exact too.
func (r *slotRing) pruneOutranked(keep int) {
	order := make([]int, 0, len(r.slots))
	for i, e := range r.epochs {
		if e != noEpoch && e < r.newest {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(r.epochs[b], r.epochs[a]) })
	var better topN // the keep slowest of the slots seen, newest first
	better.keep = keep
	for _, i := range order {
		t := &r.slots[i]
		kept := t.items[:0]
		for _, it := range t.items {
			if len(better.items) < keep || slowerFirst(it, better.items[0]) < 0 {
				kept = append(kept, it)
			}
		}
		clear(t.items[len(kept):])
		t.items = kept
		t.heapify()
		for _, it := range kept {
			better.offerRanked(it)
		}
	}
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
	r.newest = max(r.newest, e)
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
