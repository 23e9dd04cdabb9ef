package aggregate

import (
	"math"
	"time"

	"github.com/latscope/latscope/event"
)

// A TTFT breakdown drawn for a percentile must add up to the number it
// claims, and per-stage percentiles do not add up to the TTFT percentile. So
// for pXX latscope shows the mean breakdown of the requests in that band of
// TTFT (p99: the slowest 1%), whose stages do add up to the band's mean TTFT.
// Requests are kept in log-spaced TTFT buckets per time slot, each bucket
// holding exact sums (in ns) of TTFT, every breakdown stage, decode time and
// tokens; a band is the buckets that cover its percentile range, the edge
// buckets counted in part (their sums scaled by the share of their requests
// that fall in the range, so the band's stages still add up to its TTFT).

// BandStat names a breakdown band.
type BandStat int

// The bands: every request, then the bands around p50 and p90, and the
// slowest 1%.
const (
	BandMean BandStat = iota
	BandP50
	BandP90
	BandP99
	NumBands
)

// String returns "mean", "p50", "p90" or "p99".
func (b BandStat) String() string {
	switch b {
	case BandMean:
		return "mean"
	case BandP50:
		return "p50"
	case BandP90:
		return "p90"
	case BandP99:
		return "p99"
	}
	return "unknown"
}

// bandRange is the TTFT percentile range each band covers.
var bandRange = [NumBands][2]float64{
	BandMean: {0, 100},
	BandP50:  {45, 55},
	BandP90:  {85, 95},
	BandP99:  {99, 100},
}

// Band is the mean TTFT breakdown of the requests in one band of a window.
type Band struct {
	Stat BandStat `json:"-"`
	// FromPct and ToPct are the TTFT percentile range (p99: 99 to 100), and
	// Requests how many requests that range holds. A bucket at the range's
	// edge counts with the share of its requests inside the range, at its
	// mean composition, so Requests is the range's exact share of the
	// window's requests (at least one).
	FromPct, ToPct   float64 `json:"-"`
	Requests         int64   `json:"requests"`
	MinTTFT, MaxTTFT float64 `json:"-"` // ms, the edges of the buckets taken
	// TTFT is the band's mean TTFT in ms: the bar's length. Stages are the
	// band's mean per breakdown stage in ms and add up to TTFT.
	TTFT   float64                 `json:"ttft"`
	Stages map[event.Stage]float64 `json:"stages"`
	// Decode is the band's mean E2E − TTFT in ms, Tokens its mean output
	// tokens: the whole request is TTFT then Decode.
	Decode float64 `json:"decode"`
	Tokens float64 `json:"tokens"`
}

// Bucket geometry: bucket 0 holds TTFTs under bandBase, bucket k ≥ 1 holds
// [bandBase·r^(k−1), bandBase·r^k) with r = 1.1 (10% wide, so an edge
// bucket's mean composition stands well for the part of it in a band), the
// last one everything above (about 40 min).
const (
	bandBuckets = 160
	bandBase    = 100 * time.Microsecond
	bandRatio   = 1.1
)

// bandStages are the breakdown's own stages, kept per bucket in
// breakdown order; stageSlots adds the others.
var bandStages = append(event.BreakdownStages(), event.StageThinking)

const stageOther = event.StageOther

// namedExtra is how many stages outside bandStages (a server's own
// Server-Timing stages: the simulator reports two) keep their own names.
const namedExtra = 4

// slotWidth is the stages a bucket sums: bandStages, the named extras,
// and stageOther last.
var slotWidth = len(bandStages) + namedExtra + 1

// stageSlots names the breakdown's stages, the one derivation of what
// every surface shows: the breakdown's own, then up to namedExtra others
// in the order they first came, each under its own name; any further one
// is summed per request as stageOther. The bands and the breakdown's
// statistics both take their names from it, so "other" is one amount
// with one number everywhere, and absent while no stage overflows.
type stageSlots struct {
	extra []event.Stage
}

// index is where stage s is summed, giving it a named slot while there
// is room.
func (s *stageSlots) index(st event.Stage) int {
	for i, b := range bandStages {
		if b == st {
			return i
		}
	}
	for i, e := range s.extra {
		if e == st {
			return len(bandStages) + i
		}
	}
	if st != stageOther && len(s.extra) < namedExtra {
		s.extra = append(s.extra, st)
		return len(bandStages) + len(s.extra) - 1
	}
	return slotWidth - 1
}

// name is the stage slot j sums.
func (s *stageSlots) name(j int) event.Stage {
	switch {
	case j < len(bandStages):
		return bandStages[j]
	case j-len(bandStages) < len(s.extra):
		return s.extra[j-len(bandStages)]
	}
	return stageOther
}

// nameOf is the name stage st is shown and summed under.
func (s *stageSlots) nameOf(st event.Stage) event.Stage { return s.name(s.index(st)) }

// bandCell sums the requests of one TTFT bucket.
type bandCell struct {
	n, tokens    int64
	ttft, decode int64 // ns
	stages       []int64
}

type bandSet struct {
	cells []bandCell // bandBuckets of them (see newBandSets)
}

// newBandSets makes n band sets with every cell allocated up front, in two
// backing arrays. The tracker's 41 sets (the run, 10 fine and 30 coarse
// slots) hold about 1.5 MB; allocated on first use they grew the heap for
// the five minutes the coarse ring takes to fill, and a long run's heap
// should be as large after one minute as it will ever be.
func newBandSets(n int) []bandSet {
	width := slotWidth
	cells := make([]bandCell, n*bandBuckets)
	stages := make([]int64, n*bandBuckets*width)
	for i := range cells {
		cells[i].stages = stages[i*width : (i+1)*width : (i+1)*width]
	}
	sets := make([]bandSet, n)
	for i := range sets {
		sets[i].cells = cells[i*bandBuckets : (i+1)*bandBuckets : (i+1)*bandBuckets]
	}
	return sets
}

func resetBandSet(b *bandSet) {
	for i := range b.cells {
		c := &b.cells[i]
		c.n, c.tokens, c.ttft, c.decode = 0, 0, 0, 0
		clear(c.stages)
	}
}

func bucketOf(ttft time.Duration) int {
	if ttft < bandBase {
		return 0
	}
	k := 1 + int(math.Log(float64(ttft)/float64(bandBase))/math.Log(bandRatio))
	return min(k, bandBuckets-1)
}

func bucketEdges(k int) (lo, hi time.Duration) {
	if k == 0 {
		return 0, bandBase
	}
	lo = time.Duration(float64(bandBase) * math.Pow(bandRatio, float64(k-1)))
	hi = time.Duration(float64(bandBase) * math.Pow(bandRatio, float64(k)))
	return lo, hi
}

func (b *bandSet) add(r *event.Request, basis TTFTBasis, slots *stageSlots) {
	// On the answer basis a reasoning request's bar runs on to its first
	// answer token, its thinking the last segment.
	ttft, thinking := r.TTFT, time.Duration(0)
	if basis != BasisFirst && r.Thinking() > 0 {
		ttft, thinking = r.TTFTAnswer, r.Thinking()
	}
	c := &b.cells[bucketOf(ttft)]
	c.n++
	c.ttft += int64(ttft)
	c.stages[slots.index(event.StageThinking)] += int64(thinking)
	c.decode += int64(max(r.E2E-ttft, 0))
	c.tokens += int64(max(r.OutputTokens, 0))
	for _, st := range r.Breakdown {
		c.stages[slots.index(st.Stage)] += int64(st.Duration)
	}
}

// mergeInto adds b's cells into dst (which has bandBuckets cells).
func (b *bandSet) mergeInto(dst []bandCell) {
	for i := range b.cells {
		c := &b.cells[i]
		if c.n == 0 {
			continue
		}
		d := &dst[i]
		if d.stages == nil {
			d.stages = make([]int64, slotWidth)
		}
		d.n += c.n
		d.tokens += c.tokens
		d.ttft += c.ttft
		d.decode += c.decode
		for j, v := range c.stages {
			d.stages[j] += v
		}
	}
}

// bandTracker keeps the bands of every window.
type bandTracker struct {
	basis        TTFTBasis
	run          bandSet
	fine, coarse *ring[bandSet]
	scratch      []bandCell
	slots        *stageSlots // the aggregator's: the stages' names
}

func newBandTracker(basis TTFTBasis, slots *stageSlots) *bandTracker {
	sets := newBandSets(2 + fineSlots + coarseSlots)
	t := &bandTracker{
		basis:   basis,
		slots:   slots,
		run:     sets[0],
		fine:    newRing(fineWidth, fineSlots, resetBandSet),
		coarse:  newRing(coarseWidth, coarseSlots, resetBandSet),
		scratch: sets[1].cells,
	}
	copy(t.fine.slots, sets[2:2+fineSlots])
	copy(t.coarse.slots, sets[2+fineSlots:])
	return t
}

func (t *bandTracker) add(end time.Time, r *event.Request) {
	t.run.add(r, t.basis, t.slots)
	if s := t.fine.slot(end); s != nil {
		s.add(r, t.basis, t.slots)
	}
	if s := t.coarse.slot(end); s != nil {
		s.add(r, t.basis, t.slots)
	}
}

// bands returns every band of window w at now.
func (t *bandTracker) bands(w Window, now time.Time) [NumBands]Band {
	cells := t.scratch
	for i := range cells {
		c := &cells[i]
		c.n, c.tokens, c.ttft, c.decode = 0, 0, 0, 0
		clear(c.stages)
	}
	if w == WinRun {
		t.run.mergeInto(cells)
	} else {
		fine, from, to, _ := bounds(w, now)
		r := t.coarse
		if fine {
			r = t.fine
		}
		r.each(from, to, func(b *bandSet) { b.mergeInto(cells) })
	}
	var out [NumBands]Band
	for b := BandMean; b < NumBands; b++ {
		out[b] = bandOf(b, cells, t.slots)
	}
	return out
}

// bandOf sums the requests of band b's percentile range: the buckets
// inside it whole, the ones across its edges in part.
func bandOf(b BandStat, cells []bandCell, slots *stageSlots) Band {
	band := Band{Stat: b, FromPct: bandRange[b][0], ToPct: bandRange[b][1]}
	var total int64
	for i := range cells {
		total += cells[i].n
	}
	if total == 0 {
		return band
	}
	// The band holds ranks (lo, hi] of the requests sorted by TTFT (ranks
	// from 1); at least one request, so a window of one has every band.
	lo := math.Floor(band.FromPct / 100 * float64(total))
	hi := math.Max(math.Ceil(band.ToPct/100*float64(total)), lo+1)
	var n, tokens, ttft, decode float64
	stages := make([]float64, slotWidth)
	first, last := -1, -1
	var seen float64
	for i := range cells {
		c := &cells[i]
		if c.n == 0 {
			continue
		}
		from, to := seen, seen+float64(c.n) // this bucket holds ranks (from, to]
		seen = to
		inside := math.Min(to, hi) - math.Max(from, lo)
		if inside <= 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		share := inside / float64(c.n)
		n += inside
		tokens += share * float64(c.tokens)
		ttft += share * float64(c.ttft)
		decode += share * float64(c.decode)
		for j, v := range c.stages {
			stages[j] += share * float64(v)
		}
	}
	band.Requests = int64(math.Round(n))
	band.TTFT = nsToMS(ttft / n)
	band.Decode = nsToMS(decode / n)
	band.Tokens = tokens / n
	lo0, _ := bucketEdges(first)
	_, hi1 := bucketEdges(last)
	band.MinTTFT, band.MaxTTFT = nsToMS(float64(lo0)), nsToMS(float64(hi1))
	band.Stages = make(map[event.Stage]float64)
	for j, v := range stages {
		if v == 0 {
			continue
		}
		band.Stages[slots.name(j)] = nsToMS(v / n)
	}
	return band
}

func nsToMS(ns float64) float64 { return ns / float64(time.Millisecond) }
