package aggregate

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// DefaultSampleKeep is how many requests each list of the request sample
// holds by default (Config.SampleKeep).
const DefaultSampleKeep = 20

// RequestSample is what the dashboard's requests view lists: the latest
// finished requests, and the slowest of each window (ranked by TTFT; a
// request that never got a first token ranks by its E2E, a lower bound of
// the TTFT it would have had), with the decode numbers of each. A request
// counts in the window that holds its completion, as in the statistics.
// The records are shared, not copied: a record is never changed once it
// is emitted (a listed one may be a thinned copy, see sampleChunks, or a
// judged one, see ProbeJudge).
type RequestSample struct {
	Latest  []*event.Request             // newest first
	Slowest [NumWindows][]*event.Request // slowest first
	// Decode holds the decode numbers of every listed request, taken from
	// all of its chunks (before any thinning).
	Decode map[*event.Request]DecodeSummary
}

// DecodeSummary is what a request's decode comes to: the median and the
// worst gap between its content chunks, and where the worst one ended.
type DecodeSummary struct {
	Chunks     int           // content chunks (before any thinning)
	P50, Worst time.Duration // ITL median and maximum
	WorstAt    int           // index of the chunk that ended the worst gap
	WorstEnd   time.Duration // and its arrival (offset from Start)
}

// DecodeOf takes the decode numbers of r from all its chunks.
func DecodeOf(r *event.Request) DecodeSummary {
	itl := r.ITLs()
	sum := DecodeSummary{Chunks: len(r.Chunks)}
	for i, g := range itl {
		if g > sum.Worst {
			sum.Worst, sum.WorstAt, sum.WorstEnd = g, i+1, r.Chunks[i+1].At
		}
	}
	if len(itl) > 0 {
		slices.Sort(itl)
		sum.P50 = itl[len(itl)/2]
	}
	return sum
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

// requestSampler keeps the request sample: the latest keep requests, and
// the slowest keep of each window. It holds at most keep requests per time
// slot, whatever the request rate: its windows are rings of slots like the
// statistics' (1 s slots for 10 s, 10 s slots for 1 and 5 minutes). The
// aggregator's goroutine owns it; what sample returns is never touched
// again.
type requestSampler struct {
	keep   int
	latest []ranked // ring
	next   int
	fine   sampleRing
	coarse sampleRing
	run    topN
	// newestEnd is the latest end of a request added: the lists' windows
	// reach it even when the snapshot they are drawn with is older.
	newestEnd time.Time
	// decoded holds the decode numbers of the requests the last sample
	// listed (it is that sample's Decode, read-only), so a request listed
	// again is not summed up again.
	decoded map[*event.Request]DecodeSummary
}

func newRequestSampler(keep int) *requestSampler {
	return &requestSampler{
		keep:   keep,
		latest: make([]ranked, 0, keep),
		fine:   newSampleRing(fineWidth, fineSlots, keep),
		coarse: newSampleRing(coarseWidth, coarseSlots, keep),
		run:    topN{keep: keep},
	}
}

// add takes one finished request; warm-up requests are ignored. It does
// not copy r (unless it thins it), which must not change afterwards.
func (s *requestSampler) add(r *event.Request) {
	if r == nil || r.Warmup {
		return
	}
	end, key := r.EndedAt(), rank(r)
	// A thinned request's decode summary travels with it in every list, so
	// nothing holds a request (16 KB thinned) that no list holds: a map of
	// summaries beside the lists kept up to 860 of them alive, and the
	// dashboard's heap grew for as long as the map took to fill.
	it := ranked{key: key, r: r}
	if thinned, sum, ok := thin(r); ok {
		held := new(DecodeSummary) // only a thinned one's escapes
		*held = sum
		it.r, it.sum = thinned, held
	}
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
	if t := s.fine.take(end); t != nil {
		t.offerRanked(it)
	}
	if e := s.coarse.epoch(end); e > s.coarse.newest && s.coarse.newest != noEpoch {
		// A new coarse slot begins: what the older slots hold that can
		// never again be listed goes (see pruneOutranked).
		s.coarse.pruneOutranked(s.keep)
	}
	if t := s.coarse.take(end); t != nil {
		t.offerRanked(it)
	}
}

// thin returns r, or when it has more than sampleChunks chunks a copy with
// its chunks thinned (see sampleChunks) and the summary of all of them.
func thin(r *event.Request) (*event.Request, DecodeSummary, bool) {
	n := len(r.Chunks)
	if n <= sampleChunks {
		return r, DecodeSummary{}, false
	}
	sum := DecodeOf(r)
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

// sample returns the lists, with windows ending at now (a snapshot's Now)
// or at the newest request's end if that is later. The snapshot is taken a
// little less often than requests arrive: windows that ended at its Now
// left out the newest requests, which the latest list showed, so a request
// slower than rows of the slowest list could be missing from it.
func (s *requestSampler) sample(now time.Time) RequestSample {
	if s.newestEnd.After(now) {
		now = s.newestEnd
	}
	out := RequestSample{Decode: make(map[*event.Request]DecodeSummary, len(s.decoded))}
	newest := make([]ranked, 0, len(s.latest))
	for i := len(s.latest) - 1; i >= 0; i-- {
		newest = append(newest, s.latest[(s.next+i)%len(s.latest)])
	}
	out.Latest = s.listed(&out, newest)
	var buf []ranked
	for w := Window(0); w < NumWindows; w++ {
		buf = buf[:0]
		switch w {
		case Win10s:
			buf = s.fine.collect(buf, now, fineSlots)
		case Win1m:
			buf = s.coarse.collect(buf, now, slotsPer1m)
		case Win5m:
			buf = s.coarse.collect(buf, now, slotsPer5m)
		default:
			buf = append(buf, s.run.items...)
		}
		out.Slowest[w] = s.listed(&out, slowest(buf, s.keep))
	}
	s.decoded = out.Decode
	return out
}

// listed returns items' requests, and notes each one's decode numbers in
// out.Decode: a thinned one's travel with it, the others are taken from
// its chunks (once: the last sample's are kept).
func (s *requestSampler) listed(out *RequestSample, items []ranked) []*event.Request {
	list := make([]*event.Request, 0, len(items))
	for _, it := range items {
		list = append(list, it.r)
		if _, ok := out.Decode[it.r]; ok {
			continue
		}
		switch sum, ok := s.decoded[it.r]; {
		case it.sum != nil:
			out.Decode[it.r] = *it.sum
		case ok:
			out.Decode[it.r] = sum
		default:
			out.Decode[it.r] = DecodeOf(it.r)
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
	sum *DecodeSummary // the decode of all r's chunks when r is thinned; else nil
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

// sampleRing is a ring of time slots (the statistics' ring), each keeping
// its slowest requests, and the newest epoch a slot holds.
type sampleRing struct {
	*ring[topN]
	newest int64 // noEpoch before the first
}

func newSampleRing(width time.Duration, n, keep int) sampleRing {
	r := newRing(width, n, (*topN).reset)
	for i := range r.slots {
		r.slots[i] = topN{keep: keep, items: make([]ranked, 0, keep)}
	}
	return sampleRing{ring: r, newest: noEpoch}
}

// take returns t's slot (see ring.slot), noting the newest epoch.
func (r *sampleRing) take(t time.Time) *topN {
	s := r.slot(t)
	if s != nil {
		r.newest = max(r.newest, r.epoch(t))
	}
	return s
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
func (r *sampleRing) pruneOutranked(keep int) {
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

// collect appends the requests of the n slots ending with now's.
func (r *sampleRing) collect(dst []ranked, now time.Time, n int) []ranked {
	to := r.epoch(now)
	r.each(to-int64(n)+1, to, func(t *topN) { dst = append(dst, t.items...) })
	return dst
}
