package collector

import (
	"math"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/promdialect"
)

// maxGauges bounds ServerSample.Gauges: a server with thousands of gauge
// series must not turn every sample into a megabyte of JSON.
const maxGauges = 256

// Derive computes one interval's ServerSample from two scrapes of the same
// server: the gauges as they are in cur, and the rates and stage statistics
// of what happened between prev and cur. With a nil prev (the first scrape)
// the sample carries the gauges only.
//
// Whatever the dialect does not find stays absent (a nil pointer or a missing
// map key), never zero. Several series of one metric (several models or
// engines) are summed, except KV cache fractions, which are averaged.
//
// Counters are compared series by series. A counter or histogram that went
// down means the server restarted: its new value is taken as the delta since
// the restart, and its name is returned in resets. A series absent from prev
// counts from zero (some exporters create a series on its first observation).
func Derive(prev, cur *Scrape, d promdialect.Dialect) (sample event.ServerSample, resets []string) {
	sample.Dialect = d.Name
	if cur == nil {
		return sample, nil
	}
	sample.Time = cur.Time
	sample.Source = cur.Source
	sample.Waiting = sumGauge(cur, d.Waiting)
	sample.Running = sumGauge(cur, d.Running)
	sample.KVCache = kvCache(cur, d)
	sample.PrefixHitRate = meanGauge(cur, d.PrefixHitRate)
	sample.Gauges = gaugeMap(cur)
	if prev == nil {
		return sample, nil
	}

	dv := deriver{prev: prev, cur: cur, resets: map[string]bool{}}
	if dt := cur.Time.Sub(prev.Time); dt > 0 {
		sample.Interval = dt
		sample.PromptTokensPerSec = dv.rate(d.PromptTokens, dt)
		sample.GenTokensPerSec = dv.rate(d.GenTokens, dt)
	}
	sample.Preemptions = dv.delta(d.Preemptions)
	sample.PrefixQueries = dv.delta(d.PrefixQueries)
	sample.PrefixHits = dv.delta(d.PrefixHits)
	if sample.PrefixQueries == nil && sample.PrefixHits != nil {
		if miss := dv.delta(d.PrefixMisses); miss != nil {
			q := *sample.PrefixHits + *miss
			sample.PrefixQueries = &q
		}
	}
	for _, src := range d.Stages {
		st, ok := dv.stage(src)
		if !ok {
			continue
		}
		if sample.Stages == nil {
			sample.Stages = make(map[string]event.HistStat)
		}
		sample.Stages[src.Stage] = st
	}
	for name := range dv.resets {
		resets = append(resets, name)
	}
	sort.Strings(resets)
	return sample, resets
}

// selectSeries returns the series of ref present in s.
func selectSeries(s *Scrape, ref promdialect.MetricRef) []PromSeries {
	f := s.Families[ref.Name]
	if f == nil {
		return nil
	}
	if ref.Label == "" {
		return f.Series
	}
	var out []PromSeries
	for _, sr := range f.Series {
		if sr.Labels[ref.Label] == ref.Value {
			out = append(out, sr)
		}
	}
	return out
}

// firstPresent returns the series of the first candidate present in s.
func firstPresent(s *Scrape, cands []promdialect.MetricRef) (promdialect.MetricRef, []PromSeries) {
	for _, ref := range cands {
		if ss := selectSeries(s, ref); len(ss) > 0 {
			return ref, ss
		}
	}
	return promdialect.MetricRef{}, nil
}

func sumGauge(s *Scrape, cands []promdialect.MetricRef) *float64 {
	_, ss := firstPresent(s, cands)
	if len(ss) == 0 {
		return nil
	}
	total := 0.0
	for _, sr := range ss {
		total += seriesScalar(sr)
	}
	return finiteOrNil(total)
}

// meanGauge averages the series of the first candidate present in s.
func meanGauge(s *Scrape, cands []promdialect.MetricRef) *float64 {
	_, ss := firstPresent(s, cands)
	if len(ss) == 0 {
		return nil
	}
	total := 0.0
	for _, sr := range ss {
		total += seriesScalar(sr)
	}
	return finiteOrNil(total / float64(len(ss)))
}

func kvCache(s *Scrape, d promdialect.Dialect) *float64 {
	if _, ss := firstPresent(s, d.KVFraction); len(ss) > 0 {
		total := 0.0
		for _, sr := range ss {
			total += seriesScalar(sr)
		}
		return finiteOrNil(total / float64(len(ss)))
	}
	if d.KVUsed.Name == "" || d.KVTotal.Name == "" {
		return nil
	}
	used, total := sumGauge(s, []promdialect.MetricRef{d.KVUsed}), sumGauge(s, []promdialect.MetricRef{d.KVTotal})
	if used == nil || total == nil || *total <= 0 {
		return nil
	}
	return finiteOrNil(*used / *total)
}

// gaugeMap lists every gauge (and untyped series) by name; a family with
// several series gets one key per label set, as in name{engine="0"}.
func gaugeMap(s *Scrape) map[string]float64 {
	names := make([]string, 0, len(s.Families))
	for name, f := range s.Families {
		if f.Type == dto.MetricType_GAUGE || f.Type == dto.MetricType_UNTYPED {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	out := make(map[string]float64)
	for _, name := range names {
		f := s.Families[name]
		for _, sr := range f.Series {
			if len(out) >= maxGauges {
				return out
			}
			key := name
			if len(f.Series) > 1 {
				key = name + "{" + sr.Key + "}"
			}
			out[key] = seriesScalar(sr)
		}
	}
	return out
}

// scalar is a series' single number: its value, or a histogram's sum (how
// TGI's token-length histograms count tokens).
func seriesScalar(sr PromSeries) float64 {
	if sr.Hist != nil {
		return sr.Hist.Sum
	}
	return sr.Value
}

// deriver compares one scrape with the previous one.
type deriver struct {
	prev, cur *Scrape
	resets    map[string]bool
}

// prevSeries finds the series with the same labels in the previous scrape.
func (dv *deriver) prevSeries(name string, sr PromSeries) (PromSeries, bool) {
	f := dv.prev.Families[name]
	if f == nil {
		return PromSeries{}, false
	}
	for _, p := range f.Series {
		if p.Key == sr.Key {
			return p, true
		}
	}
	return PromSeries{}, false
}

// counterDelta is the increase of a counter over the interval, summed over
// its series; false when the counter is absent from cur.
func (dv *deriver) counterDelta(ref promdialect.MetricRef) (float64, bool) {
	ss := selectSeries(dv.cur, ref)
	if len(ss) == 0 {
		return 0, false
	}
	total := 0.0
	for _, sr := range ss {
		now := seriesScalar(sr)
		p, ok := dv.prevSeries(ref.Name, sr)
		switch {
		case !ok:
			total += now
		case now < seriesScalar(p) || (sr.Hist != nil && p.Hist != nil && sr.Hist.Count < p.Hist.Count):
			dv.resets[ref.Name] = true
			total += now
		default:
			total += now - seriesScalar(p)
		}
	}
	return total, isFiniteFloat(total)
}

// delta is the increase over the interval of the first candidate counter
// present, nil when none is.
func (dv *deriver) delta(cands []promdialect.MetricRef) *float64 {
	ref, ss := firstPresent(dv.cur, cands)
	if len(ss) == 0 {
		return nil
	}
	d, ok := dv.counterDelta(ref)
	if !ok {
		return nil
	}
	return &d
}

func (dv *deriver) rate(cands []promdialect.MetricRef, dt time.Duration) *float64 {
	ref, ss := firstPresent(dv.cur, cands)
	if len(ss) == 0 {
		return nil
	}
	delta, ok := dv.counterDelta(ref)
	if !ok {
		return nil
	}
	return finiteOrNil(delta / dt.Seconds())
}

// stage computes one stage's interval statistics from its histogram or,
// failing that, its counter pair.
func (dv *deriver) stage(src promdialect.StageSource) (event.HistStat, bool) {
	if ref, ss := firstPresent(dv.cur, src.Hist); len(ss) > 0 {
		deltas := make([]*PromHist, 0, len(ss))
		for _, sr := range ss {
			if sr.Hist == nil {
				continue // a mis-typed family: not a histogram
			}
			var prev *PromHist
			if p, ok := dv.prevSeries(ref.Name, sr); ok {
				prev = p.Hist
			}
			d, reset := histDelta(prev, sr.Hist)
			if reset {
				dv.resets[ref.Name] = true
			}
			deltas = append(deltas, d)
		}
		if len(deltas) == 0 {
			return event.HistStat{}, false
		}
		return histStat(mergeHists(deltas), src.ToSeconds())
	}
	if src.Sum.Name == "" || src.Count.Name == "" {
		return event.HistStat{}, false
	}
	sum, okSum := dv.counterDelta(src.Sum)
	count, okCount := dv.counterDelta(src.Count)
	if !okSum || !okCount || count < 0 {
		return event.HistStat{}, false
	}
	st := event.HistStat{Count: count}
	if count > 0 {
		st.Mean = durationFromSeconds(sum / count * src.ToSeconds())
	}
	return st, true
}

// histDelta is what a histogram gained between two scrapes. A nil prev
// counts from zero. A count or bucket that went down, or a changed bucket
// layout, means a restart: the delta is then cur itself.
func histDelta(prev, cur *PromHist) (delta *PromHist, reset bool) {
	if prev == nil {
		return cur, false
	}
	if cur.Count < prev.Count || len(cur.Buckets) != len(prev.Buckets) {
		return cur, true
	}
	d := &PromHist{Count: cur.Count - prev.Count, Sum: cur.Sum - prev.Sum, Buckets: make([]PromBucket, len(cur.Buckets))}
	for i, b := range cur.Buckets {
		p := prev.Buckets[i]
		if b.Upper != p.Upper && !(math.IsInf(b.Upper, 1) && math.IsInf(p.Upper, 1)) {
			return cur, true
		}
		if b.Cumulative < p.Cumulative {
			return cur, true
		}
		d.Buckets[i] = PromBucket{Upper: b.Upper, Cumulative: b.Cumulative - p.Cumulative}
	}
	return d, false
}

// mergeHists adds histograms observation-wise. Series of one family normally
// share their bounds; if they do not, the union of bounds is used and each
// histogram contributes, at every bound, its count at its own nearest bound
// below (a step function, so the merge never invents observations).
func mergeHists(hs []*PromHist) *PromHist {
	if len(hs) == 1 {
		return hs[0]
	}
	out := &PromHist{}
	withBuckets := true
	seen := map[float64]bool{}
	var bounds []float64
	for _, h := range hs {
		out.Count += h.Count
		out.Sum += h.Sum
		if len(h.Buckets) == 0 {
			withBuckets = false
		}
		for _, b := range h.Buckets {
			if !seen[b.Upper] {
				seen[b.Upper] = true
				bounds = append(bounds, b.Upper)
			}
		}
	}
	if !withBuckets {
		return out
	}
	sort.Float64s(bounds)
	out.Buckets = make([]PromBucket, len(bounds))
	for i, ub := range bounds {
		total := 0.0
		for _, h := range hs {
			total += cumulativeAtBound(withInfBucket(h).Buckets, ub)
		}
		out.Buckets[i] = PromBucket{Upper: ub, Cumulative: total}
	}
	return out
}

// cumulativeAtBound is the cumulative count at the largest bound <= ub.
func cumulativeAtBound(buckets []PromBucket, ub float64) float64 {
	c := 0.0
	for _, b := range buckets {
		if b.Upper > ub {
			break
		}
		c = b.Cumulative
	}
	return c
}

// withInfBucket returns h with a +Inf bucket holding every observation, adding one
// when the exposition left it out.
func withInfBucket(h *PromHist) *PromHist {
	n := len(h.Buckets)
	if n == 0 || math.IsInf(h.Buckets[n-1].Upper, 1) {
		return h
	}
	c := *h
	c.Buckets = append(append([]PromBucket(nil), h.Buckets...), PromBucket{Upper: math.Inf(1), Cumulative: math.Max(h.Count, h.Buckets[n-1].Cumulative)})
	return &c
}

// histStat summarises an interval's histogram delta; scale turns the
// metric's unit into seconds. A count of zero is a real answer (the stage
// exists but saw nothing this interval); Mean and percentiles are then zero.
func histStat(h *PromHist, scale float64) (event.HistStat, bool) {
	if !isFiniteFloat(h.Count) || h.Count < 0 {
		return event.HistStat{}, false
	}
	st := event.HistStat{Count: h.Count}
	if h.Count > 0 {
		st.Mean = durationFromSeconds(h.Sum / h.Count * scale)
	}
	buckets := withInfBucket(h).Buckets
	st.Bounds, st.Counts = bucketDeltas(buckets, scale)
	for _, q := range []struct {
		q   float64
		dst *time.Duration
	}{{0.5, &st.P50}, {0.9, &st.P90}, {0.99, &st.P99}} {
		if v, ok := bucketQuantile(q.q, buckets); ok {
			*q.dst = durationFromSeconds(v * scale)
		}
	}
	return st, true
}

// maxBuckets bounds the buckets a sample carries per stage: a histogram
// with more has them left out (its quantiles are still given).
const maxBuckets = 64

// bucketDeltas turns cumulative buckets (the last one +Inf) into finite
// bounds in seconds and the count in each bucket, with the count above
// the last finite bound at the end. A count that went down (float noise,
// a torn scrape) is taken as zero.
func bucketDeltas(buckets []PromBucket, scale float64) (bounds, counts []float64) {
	n := len(buckets)
	if n < 2 || n > maxBuckets+1 || !math.IsInf(buckets[n-1].Upper, 1) {
		return nil, nil
	}
	bounds = make([]float64, 0, n-1)
	counts = make([]float64, 0, n)
	below := 0.0
	for i, b := range buckets {
		if i < n-1 {
			v := b.Upper * scale
			if !isFiniteFloat(v) || (len(bounds) > 0 && v <= bounds[len(bounds)-1]) {
				return nil, nil
			}
			bounds = append(bounds, v)
		}
		c := b.Cumulative - below
		if !(c > 0) || !isFiniteFloat(c) {
			c = 0
		}
		counts = append(counts, c)
		below = math.Max(below, b.Cumulative)
	}
	return bounds, counts
}

// bucketQuantile estimates the q-quantile from cumulative buckets the way
// PromQL's histogram_quantile does: find the bucket holding the q·total-th
// observation and interpolate linearly within it, the first bucket's lower
// bound being 0. When that bucket is the +Inf one there is no upper bound to
// interpolate to, so the highest isFiniteFloat bound is returned: a floor on the
// true value, not an estimate of it.
func bucketQuantile(q float64, buckets []PromBucket) (float64, bool) {
	n := len(buckets)
	if n == 0 {
		return 0, false
	}
	// Enforce monotonic counts, as histogram_quantile does, so that float
	// noise or a torn scrape cannot produce a negative bucket.
	mono := make([]float64, n)
	for i, b := range buckets {
		mono[i] = b.Cumulative
		if i > 0 && mono[i] < mono[i-1] {
			mono[i] = mono[i-1]
		}
	}
	total := mono[n-1]
	if !(total > 0) {
		return 0, false
	}
	rank := q * total
	i := sort.Search(n, func(i int) bool { return mono[i] >= rank })
	if i == n {
		return 0, false
	}
	upper := buckets[i].Upper
	if math.IsInf(upper, 1) {
		if i == 0 {
			return 0, false
		}
		return buckets[i-1].Upper, isFiniteFloat(buckets[i-1].Upper)
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = buckets[i-1].Upper, mono[i-1]
	} else if upper <= 0 {
		return upper, isFiniteFloat(upper)
	}
	inBucket := mono[i] - below
	if inBucket <= 0 {
		return upper, isFiniteFloat(upper)
	}
	v := lower + (upper-lower)*(rank-below)/inBucket
	return v, isFiniteFloat(v)
}

// seconds converts to a Duration, clamping what does not fit (and mapping
// NaN to zero) so that no input can overflow it.
func durationFromSeconds(s float64) time.Duration {
	ns := s * 1e9
	switch {
	case math.IsNaN(ns):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(ns)
}

func finiteOrNil(x float64) *float64 {
	if !isFiniteFloat(x) {
		return nil
	}
	return &x
}
