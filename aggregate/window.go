package aggregate

import (
	"math"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/latscope/latscope/event"
)

// Histogram geometry. Values are recorded as integers in a metric's base unit:
// microseconds for durations, milli-tokens per second for rates. Both are
// shown divided by 1000 (milliseconds, tokens per second).
const (
	histLowest    = 1
	histHighest   = int64(10 * time.Minute / time.Microsecond) // 10 min in µs
	runDigits     = 3                                          // whole-run histograms
	slotDigits    = 2                                          // window slots: 1% is plenty for a live view
	displayFactor = 1000.0                                     // base unit → display unit
)

// Window names one of the time windows statistics are kept over.
type Window int

// The windows, shortest first.
const (
	Win10s Window = iota // last 10 s (1 s slots)
	Win1m                // last minute (10 s slots)
	Win5m                // last 5 minutes (10 s slots)
	WinRun               // the whole run
	NumWindows
)

// String returns the window's short name ("10s", "1m", "5m", "run").
func (w Window) String() string {
	switch w {
	case Win10s:
		return "10s"
	case Win1m:
		return "1m"
	case Win5m:
		return "5m"
	case WinRun:
		return "run"
	}
	return "unknown"
}

// Ring geometry. The 10 s window reads the fine ring; the 1 min and 5 min
// windows read the coarse ring. A window covers whole slots ending with the one
// that holds now, so it spans between (slots-1) and slots slot widths.
const (
	fineWidth   = time.Second
	fineSlots   = 10
	coarseWidth = 10 * time.Second
	coarseSlots = 30
	slotsPer1m  = 6
	slotsPer5m  = coarseSlots
	noEpoch     = math.MinInt64
)

// ring is a circular buffer of time slots keyed by epoch (time / width). A slot
// is reset when a later epoch claims it; data older than the slot's current
// epoch is dropped from the windows (the whole-run statistics still get it).
type ring[T any] struct {
	width  int64 // ns
	epochs []int64
	slots  []T
	reset  func(*T)
}

func newRing[T any](width time.Duration, n int, reset func(*T)) *ring[T] {
	r := &ring[T]{width: int64(width), epochs: make([]int64, n), slots: make([]T, n), reset: reset}
	for i := range r.epochs {
		r.epochs[i] = noEpoch
	}
	return r
}

// epoch returns the slot number of t.
func (r *ring[T]) epoch(t time.Time) int64 { return epochOf(t, r.width) }

// epochOf returns t's slot number for slots of width ns (floor division, so
// times before 1970 work too).
func epochOf(t time.Time, width int64) int64 {
	ns := t.UnixNano()
	e := ns / width
	if ns%width < 0 {
		e--
	}
	return e
}

// slot returns the slot for time t, resetting it if it held an older epoch,
// or nil if t is older than what the slot now holds or t is the zero time.
func (r *ring[T]) slot(t time.Time) *T {
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
		r.reset(&r.slots[i])
		r.epochs[i] = e
	}
	return &r.slots[i]
}

// each calls fn for every slot whose epoch is within [from, to].
func (r *ring[T]) each(from, to int64, fn func(*T)) {
	for i, e := range r.epochs {
		if e != noEpoch && e >= from && e <= to {
			fn(&r.slots[i])
		}
	}
}

// tally keeps a series' exact count, sum and max beside its histogram (HDR's
// mean and max are bucket-approximate; these are exact to the base unit).
// Values may be negative (a residual): the sum and max are signed.
type tally struct {
	n, sum, min, max int64
	// mean and m2 are Welford's running mean and sum of squared
	// deviations, for the standard deviation: merged with Chan's formula,
	// they stay exact where a sum of squares would cancel.
	mean, m2 float64
}

func (t *tally) add(v int64) {
	t.n++
	t.sum += v
	if t.n == 1 || v > t.max {
		t.max = v
	}
	if t.n == 1 || v < t.min {
		t.min = v
	}
	d := float64(v) - t.mean
	t.mean += d / float64(t.n)
	t.m2 += d * (float64(v) - t.mean)
}

// merge adds o's values to t.
func (t *tally) merge(o tally) {
	if o.n == 0 {
		return
	}
	if t.n == 0 {
		*t = o
		return
	}
	t.max = max(t.max, o.max)
	t.min = min(t.min, o.min)
	n := t.n + o.n
	d := o.mean - t.mean
	t.mean += d * float64(o.n) / float64(n)
	t.m2 += o.m2 + d*d*float64(t.n)*float64(o.n)/float64(n)
	t.n = n
	t.sum += o.sum
}

// stddev is the values' population standard deviation.
func (t tally) stddev() float64 {
	if t.n == 0 {
		return 0
	}
	return math.Sqrt(max(t.m2, 0) / float64(t.n))
}

// slot is one completed time slot of a metric: a sparse histogram, which
// costs memory only for the buckets it uses.
type slot struct {
	tally
	h *hdr.PackedHistogram // nil until the slot first holds values
}

func resetSlot(s *slot) {
	s.tally = tally{}
	if s.h != nil {
		s.h.Reset()
	}
}

// slotRing is a ring of sparse slots plus one dense histogram for the newest
// slot. Recording into a sparse histogram costs a binary search per value;
// the dense one is a plain increment. When a later slot begins, the dense
// histogram is folded into its sparse slot and reused. Values older than the
// newest slot (out-of-order records) go straight into their sparse slot.
type slotRing struct {
	*ring[slot]
	active      *hdr.Histogram // 2 digits, ~24 KB; created on first use
	activeEpoch int64
	// view is active packed, as of its epoch and count: every window
	// merges the newest slot, and a dense histogram merges by walking all
	// its buckets (most of a live snapshot), a packed one only those it holds.
	view                 *hdr.PackedHistogram
	viewEpoch, viewCount int64
}

func newSlotRing(width time.Duration, n int) *slotRing {
	return &slotRing{ring: newRing(width, n, resetSlot), activeEpoch: noEpoch}
}

// target returns the slot for t and, when t falls in the newest slot, the
// dense histogram to record into; (nil, nil) when t is too old or zero.
func (r *slotRing) target(t time.Time) (*slot, *hdr.Histogram) {
	if t.IsZero() {
		return nil, nil
	}
	e := r.epoch(t)
	if e > r.activeEpoch {
		r.flush()
		r.activeEpoch = e
	}
	s := r.slot(t)
	switch {
	case s == nil:
		return nil, nil
	case e != r.activeEpoch:
		if s.h == nil {
			s.h = hdr.NewPacked(histLowest, histHighest, slotDigits)
		}
		return s, nil
	}
	if r.active == nil {
		r.active = hdr.New(histLowest, histHighest, slotDigits)
	}
	return s, r.active
}

// flush folds the dense histogram into the sparse slot of its epoch.
func (r *slotRing) flush() {
	if r.active == nil || r.active.TotalCount() == 0 {
		return
	}
	if s := r.get(r.activeEpoch); s != nil {
		if s.h == nil {
			s.h = hdr.NewPacked(histLowest, histHighest, slotDigits)
		}
		s.h.MergeFrom(r.active)
	}
	r.active.Reset()
}

// activeView returns the dense histogram's values packed, packing them
// again only when a value was recorded since.
func (r *slotRing) activeView() *hdr.PackedHistogram {
	if r.view == nil {
		r.view = hdr.NewPacked(histLowest, histHighest, slotDigits)
		r.viewEpoch = noEpoch
	}
	if n := r.active.TotalCount(); r.viewEpoch != r.activeEpoch || r.viewCount != n {
		r.view.Reset()
		r.view.MergeFrom(r.active)
		r.viewEpoch, r.viewCount = r.activeEpoch, n
	}
	return r.view
}

func (r *slotRing) memory() int {
	n := 0
	if r.active != nil {
		n += r.active.ByteSize()
	}
	if r.view != nil {
		n += r.view.GetMemorySize()
	}
	for i := range r.slots {
		if h := r.slots[i].h; h != nil {
			n += h.GetMemorySize()
		}
	}
	return n
}

// record adds v to a slot: into dense when given, else into the slot's sparse one.
func recordSlot(s *slot, dense *hdr.Histogram, v int64) {
	if s == nil {
		return
	}
	s.add(v)
	if dense != nil {
		_ = dense.RecordValue(v) // v is clamped into range: cannot fail
	} else {
		_ = s.h.RecordValue(v)
	}
}

// clamp brings v into the histograms' range and says whether it had to.
// Only a metric's non-negative values reach it (see metric.record).
func clamp(v int64) (int64, bool) {
	switch {
	case v < 0:
		return 0, true
	case v > histHighest:
		return histHighest, true
	}
	return v, false
}

// metric is one quantity tracked over every window: a dense 3-digit
// histogram for the whole run (~172 KB) and two rings of 2-digit slots.
//
// HDR histograms hold no negative value, and a residual (unattributed) can
// be negative: the server's numbers exceed the client's window. Rather than
// clip those to zero (which biases the mean) or offset them (which would
// spend the histogram's relative precision on the offset), a metric keeps
// its negative values' magnitudes in a second metric, neg, made on the
// first one. The tallies here count every value, signed, so count, mean
// and max are exact; the percentiles are read from both histograms by rank
// (signedStats), each within the histogram's precision.
type metric struct {
	runTally tally
	run      *hdr.Histogram // created on first use
	fine     *slotRing
	coarse   *slotRing
	neg      *metric // magnitudes of the negative values; nil until one
	// gen counts the changes to m (and to m.neg, whose values m's slots
	// count too); cached holds each window's last Stats, valid while gen
	// and the window's slots with values are the same. A live view asks
	// for every window several times a second, most often of values that
	// have not changed since it last asked (an idle canary: one request
	// every few seconds), and each answer merges histograms.
	gen    uint64
	cached [NumWindows]cachedStats
}

// cachedStats is a window's Stats and what they were computed from: m's
// gen, the ring (fine or coarse) and the first and last epochs within the
// window that held values.
type cachedStats struct {
	gen         uint64
	fine, valid bool
	first, last int64
	st          Stats
}

func newMetric() *metric {
	return &metric{fine: newSlotRing(fineWidth, fineSlots), coarse: newSlotRing(coarseWidth, coarseSlots)}
}

func (m *metric) recordRun(v int64) {
	if m.run == nil {
		m.run = hdr.New(histLowest, histHighest, runDigits)
	}
	m.runTally.add(v)
	_ = m.run.RecordValue(v)
}

// record adds one value (base unit) completed at t; it returns true if the
// value was clamped (beyond 10 min either way).
func (m *metric) record(t time.Time, v int64) bool {
	m.gen++
	if v < 0 {
		return m.recordNegative(t, v)
	}
	v, clamped := clamp(v)
	m.recordRun(v)
	fs, fd := m.fine.target(t)
	recordSlot(fs, fd, v)
	cs, cd := m.coarse.target(t)
	recordSlot(cs, cd, v)
	return clamped
}

// recordNegative counts v (< 0) in m's tallies and its magnitude in m.neg.
func (m *metric) recordNegative(t time.Time, v int64) bool {
	if m.neg == nil {
		m.neg = newMetric()
	}
	mag := histHighest + 1 // beyond the range, whatever -v is (-MinInt64 overflows)
	if v >= -histHighest {
		mag = -v
	}
	clamped := m.neg.record(t, mag)
	v = -min(mag, histHighest)
	m.runTally.add(v)
	if s, _ := m.fine.target(t); s != nil {
		s.add(v)
	}
	if s, _ := m.coarse.target(t); s != nil {
		s.add(v)
	}
	return clamped
}

// recordGaps records the gap between each pair of consecutive chunks, all
// completed at t, and returns how many values it clamped. The slots are
// looked up once, so each value costs three histogram increments.
func (m *metric) recordGaps(t time.Time, chunks []event.Chunk) int64 {
	m.gen++
	fs, fd := m.fine.target(t)
	cs, cd := m.coarse.target(t)
	var clamped int64
	for i := 1; i < len(chunks); i++ {
		v, c := clamp(int64((chunks[i].At - chunks[i-1].At) / time.Microsecond))
		if c {
			clamped++
		}
		m.recordRun(v)
		recordSlot(fs, fd, v)
		recordSlot(cs, cd, v)
	}
	return clamped
}

func (m *metric) memory() int {
	n := m.fine.memory() + m.coarse.memory()
	if m.run != nil {
		n += m.run.ByteSize()
	}
	if m.neg != nil {
		n += m.neg.memory()
	}
	return n
}

// Stats summarises one metric over one window. Durations are in milliseconds;
// the per-request tokens/s metric is in tokens per second.
type Stats struct {
	Count  int64   `json:"count"`
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"` // population standard deviation
	Min    float64 `json:"min"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P95    float64 `json:"p95"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p99_9"`
	Max    float64 `json:"max"`
	// Negative counts the values below zero (a residual can be): they are
	// in the mean and percentiles as they are, never clipped.
	Negative int64 `json:"negative,omitempty"`
}

// statsPercentiles are the percentiles a Stats holds, in its field order
// (in percent: HDR takes 99 for the 99th percentile, not 0.99).
var statsPercentiles = [...]float64{50, 90, 95, 99, 99.9}

// merger turns slot series into Stats, reusing dense scratch histograms
// so a snapshot allocates little.
type merger struct {
	scratch    *hdr.Histogram
	negScratch *hdr.Histogram // the negative values' magnitudes; made on first use
	pcts       []float64
}

func newMerger() *merger {
	return &merger{
		scratch: hdr.New(histLowest, histHighest, slotDigits),
		pcts:    statsPercentiles[:],
	}
}

// window merges the slots of m's ring (fine or coarse) within [from, to]
// and summarises them.
func (mg *merger) window(m *metric, fine bool, from, to int64) Stats {
	ring := func(m *metric) *slotRing {
		if fine {
			return m.fine
		}
		return m.coarse
	}
	t := mergeRing(ring(m), from, to, mg.scratch)
	if t.n == 0 {
		return Stats{}
	}
	if m.neg == nil {
		return finishStats(t, mg.scratch.ValueAtPercentilesSlice(mg.pcts))
	}
	if mg.negScratch == nil {
		mg.negScratch = hdr.New(histLowest, histHighest, slotDigits)
	}
	negN := mergeRing(ring(m.neg), from, to, mg.negScratch).n
	return mg.signedStats(t, mg.scratch, mg.negScratch, negN)
}

// mergeRing merges r's slots within [from, to] into scratch (reset first)
// and returns their tally.
func mergeRing(r *slotRing, from, to int64, scratch *hdr.Histogram) tally {
	scratch.Reset()
	var t tally
	r.each(from, to, func(s *slot) {
		if s.n == 0 {
			return
		}
		if s.h != nil {
			s.h.MergeInto(scratch)
		}
		t.merge(s.tally)
	})
	if r.active != nil && r.activeEpoch >= from && r.activeEpoch <= to {
		r.activeView().MergeInto(scratch)
	}
	return t
}

// whole summarises a metric's whole run.
func (mg *merger) whole(m *metric) Stats {
	if m.runTally.n == 0 {
		return Stats{}
	}
	if m.neg == nil {
		return finishStats(m.runTally, m.run.ValueAtPercentilesSlice(mg.pcts))
	}
	return mg.signedStats(m.runTally, m.run, m.neg.run, m.neg.runTally.n)
}

// signedStats summarises values of which negN are negative: pos holds the
// others, neg the negatives' magnitudes (either may be nil when empty). A
// percentile's rank is taken as HDR takes it, over all t.n values; a rank
// within the negatives reads neg from its other end.
func (mg *merger) signedStats(t tally, pos, neg *hdr.Histogram, negN int64) Stats {
	q := make([]int64, len(mg.pcts))
	posN := t.n - negN
	for i, p := range mg.pcts {
		rank := max(int64(p/100*float64(t.n)+0.5), 1)
		switch {
		case rank <= negN && neg != nil:
			// The rank-th smallest signed value is the (negN-rank+1)-th
			// smallest magnitude.
			q[i] = -neg.ValueAtPercentile(100 * float64(negN-rank+1) / float64(negN))
		case posN > 0 && pos != nil:
			q[i] = pos.ValueAtPercentile(100 * float64(rank-negN) / float64(posN))
		}
	}
	st := finishStats(t, q)
	st.Negative = negN
	return st
}

func finishStats(t tally, q []int64) Stats {
	st := Stats{
		Count:  t.n,
		Mean:   float64(t.sum) / float64(t.n) / displayFactor,
		Stddev: t.stddev() / displayFactor,
		Min:    float64(t.min) / displayFactor,
		Max:    float64(t.max) / displayFactor,
	}
	// HDR reports the highest value equivalent to a bucket, which can exceed
	// the exact max by the bucket's width (or, for a negative value read
	// from its magnitude, fall below the exact min); a percentile stays
	// within [min, max].
	for i, p := range []*float64{&st.P50, &st.P90, &st.P95, &st.P99, &st.P999} {
		*p = math.Max(math.Min(float64(q[i])/displayFactor, st.Max), st.Min)
	}
	return st
}

// stats summarises m over window w ending at the epoch holding now.
func (mg *merger) stats(m *metric, w Window, now time.Time) Stats {
	if w < 0 || w >= NumWindows {
		return Stats{}
	}
	c := &m.cached[w]
	if w == WinRun {
		if !c.valid || c.gen != m.gen {
			*c = cachedStats{gen: m.gen, valid: true, st: mg.whole(m)}
		}
		return c.st
	}
	fine, from, to, _ := bounds(w, now)
	ring := m.coarse
	if fine {
		ring = m.fine
	}
	// With m unchanged, the values within [from, to] are those of its
	// slots between the first and the last that hold any there.
	first, last := ring.heldWithin(from, to)
	if !c.valid || c.gen != m.gen || c.fine != fine || c.first != first || c.last != last {
		*c = cachedStats{gen: m.gen, valid: true, fine: fine, first: first, last: last, st: mg.window(m, fine, from, to)}
	}
	return c.st
}

// heldWithin returns the first and last epochs within [from, to] of r's
// slots that hold values (noEpoch twice when none does).
func (r *slotRing) heldWithin(from, to int64) (first, last int64) {
	first, last = noEpoch, noEpoch
	for i, e := range r.epochs {
		if e == noEpoch || e < from || e > to || r.slots[i].n == 0 {
			continue
		}
		if first == noEpoch || e < first {
			first = e
		}
		if last == noEpoch || e > last {
			last = e
		}
	}
	return first, last
}

// get returns the slot holding epoch e, or nil if no slot does.
func (r *ring[T]) get(e int64) *T {
	i := int(e % int64(len(r.slots)))
	if i < 0 {
		i += len(r.slots)
	}
	if r.epochs[i] != e {
		return nil
	}
	return &r.slots[i]
}
