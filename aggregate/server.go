package aggregate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/stats"
)

// trendPoints is how many recent queue-depth readings are kept for the
// least-squares trend (at a 1 s scrape interval, two minutes).
const trendPoints = 128

// gauge accumulates one server gauge: its peak, last value, and its
// time-weighted mean (trapezoids between consecutive readings from the same
// source, so irregular scrape intervals weigh correctly).
type gauge struct {
	n        int64
	sum      float64 // plain sum, for the mean while no time has passed
	integral float64 // value × seconds
	span     float64 // seconds covered by the integral
	peak     float64
	last     float64
}

func (g *gauge) add(v float64) {
	if g.n == 0 || v > g.peak {
		g.peak = v
	}
	g.n++
	g.sum += v
	g.last = v
}

// between credits the dt between readings prev and cur.
func (g *gauge) between(prev, cur float64, dt time.Duration) {
	g.integral += (prev + cur) / 2 * dt.Seconds()
	g.span += dt.Seconds()
}

func (g *gauge) stat() Gauge {
	if g.n == 0 {
		return Gauge{}
	}
	mean := g.sum / float64(g.n)
	if g.span > 0 {
		mean = g.integral / g.span
	}
	return Gauge{Seen: true, Mean: mean, Peak: g.peak, Last: g.last}
}

// stageMean is a count-weighted mean of server interval stage means.
type stageMean struct {
	count float64
	wsum  float64 // Σ count × mean, in ns
}

func (s *stageMean) add(h event.HistStat) {
	if !(h.Count > 0) || math.IsInf(h.Count, 0) || h.Mean < 0 {
		return
	}
	s.count += h.Count
	s.wsum += h.Count * float64(h.Mean)
}

// serverSlot is one window slot of server data.
type serverSlot struct {
	stages  map[string]*stageMean
	waitSum float64
	waitN   int64
	traffic trafficAcc
}

func resetServerSlot(s *serverSlot) {
	s.traffic.reset()
	for _, m := range s.stages {
		*m = stageMean{}
	}
	s.waitSum, s.waitN = 0, 0
}

type trendPoint struct {
	t time.Time
	v float64
}

// serverState aggregates ServerSamples.
type serverState struct {
	samples, stale int64
	last           *event.ServerSample
	prev           map[string]*event.ServerSample // last good sample per source
	waiting        gauge
	running        gauge
	kv             gauge
	stages         map[string]*stageMean
	fine, coarse   *ring[serverSlot]
	trend          [trendPoints]trendPoint
	trendN         int
	traffic        trafficAcc // the whole run's
}

func newServerState() serverState {
	return serverState{
		prev:   make(map[string]*event.ServerSample),
		stages: make(map[string]*stageMean),
		fine:   newRing(fineWidth, fineSlots, resetServerSlot),
		coarse: newRing(coarseWidth, coarseSlots, resetServerSlot),
	}
}

func (s *serverState) add(x *event.ServerSample) {
	s.samples++
	s.last = x
	if x.Stale || x.Error != "" {
		// A stale sample repeats the last good values: counting them again
		// would weight the mean towards the moments the scrape failed.
		s.stale++
		return
	}
	if p := s.prev[x.Source]; p != nil {
		if dt := x.Time.Sub(p.Time); dt > 0 {
			betweenGauge(&s.waiting, p.Waiting, x.Waiting, dt)
			betweenGauge(&s.running, p.Running, x.Running, dt)
			betweenGauge(&s.kv, p.KVCache, x.KVCache, dt)
		}
	}
	if _, ok := s.prev[x.Source]; ok || len(s.prev) < maxSources {
		s.prev[x.Source] = x
	}
	addGauge(&s.waiting, x.Waiting)
	addGauge(&s.running, x.Running)
	addGauge(&s.kv, x.KVCache)
	if finite(x.Waiting) {
		s.trend[s.trendN%trendPoints] = trendPoint{t: x.Time, v: *x.Waiting}
		s.trendN++
	}

	slots := []*serverSlot{s.fine.slot(x.Time), s.coarse.slot(x.Time)}
	s.traffic.add(x)
	for _, sl := range slots {
		if sl != nil {
			sl.traffic.add(x)
		}
		if sl != nil && finite(x.Waiting) {
			sl.waitSum += *x.Waiting
			sl.waitN++
		}
	}
	for name, h := range x.Stages {
		m := s.stages[name]
		if m == nil {
			if len(s.stages) >= maxStageKeys {
				continue
			}
			m = &stageMean{}
			s.stages[name] = m
		}
		m.add(h)
		for _, sl := range slots {
			if sl == nil {
				continue
			}
			if sl.stages == nil {
				sl.stages = make(map[string]*stageMean)
			}
			sm := sl.stages[name]
			if sm == nil {
				sm = &stageMean{}
				sl.stages[name] = sm
			}
			sm.add(h)
		}
	}
}

func addGauge(g *gauge, v *float64) {
	if finite(v) {
		g.add(*v)
	}
}

// finite reports whether v is set and a real number (a Prometheus gauge can be NaN).
func finite(v *float64) bool {
	return v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0)
}

func betweenGauge(g *gauge, prev, cur *float64, dt time.Duration) {
	if finite(prev) && finite(cur) {
		g.between(*prev, *cur, dt)
	}
}

// queueSlope returns the least-squares slope of queue depth over time (per
// second) for the readings within span before now, and how many it used.
func (s *serverState) queueSlope(now time.Time, span time.Duration) (slope float64, n int, covered time.Duration) {
	from := now.Add(-span)
	var pts []trendPoint
	k := min(s.trendN, trendPoints)
	for i := 0; i < k; i++ {
		p := s.trend[i]
		if p.t.After(from) && !p.t.After(now) {
			pts = append(pts, p)
		}
	}
	if len(pts) < 2 {
		return 0, len(pts), 0
	}
	t0, t1 := pts[0].t, pts[0].t
	for _, p := range pts {
		if p.t.Before(t0) {
			t0 = p.t
		}
		if p.t.After(t1) {
			t1 = p.t
		}
	}
	slope, _ = stats.LineFit(len(pts), func(i int) (float64, float64) { return pts[i].t.Sub(t0).Seconds(), pts[i].v })
	return slope, len(pts), t1.Sub(t0)
}

func stageMeansMS(m map[string]*stageMean) map[string]float64 {
	out := make(map[string]float64, len(m))
	for name, s := range m {
		if s.count > 0 {
			out[name] = s.wsum / s.count / float64(time.Millisecond)
		}
	}
	return out
}

// Gauge summarises one server gauge over the run.
type Gauge struct {
	Seen bool    `json:"seen"`
	Mean float64 `json:"mean"` // time-weighted
	Peak float64 `json:"peak"`
	Last float64 `json:"last"`
}

// ServerStats is what the server's own metrics said over the run.
type ServerStats struct {
	Samples int64  `json:"samples"`
	Stale   int64  `json:"stale_samples"` // samples that repeated old values after a failed scrape
	Dialect string `json:"dialect,omitempty"`
	Source  string `json:"source,omitempty"`
	// LastStale and LastError describe the most recent sample.
	LastStale bool      `json:"last_stale,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	LastTime  time.Time `json:"last_time,omitzero"`

	QueueDepth Gauge `json:"queue_depth"`
	Running    Gauge `json:"running"`
	KVCache    Gauge `json:"kv_cache"` // fraction 0..1
	// StageMeans are the server's interval stage means (queue, prefill, ...),
	// weighted by their observation counts, in milliseconds.
	StageMeans map[string]float64 `json:"stage_means_ms"`
	// QueueSlope is the least-squares trend of queue depth over the last
	// minute, in requests per second (0 with fewer than two readings).
	QueueSlope float64 `json:"queue_slope_per_s"`
}

func (s *serverState) stats(now time.Time) ServerStats {
	out := ServerStats{
		Samples:    s.samples,
		Stale:      s.stale,
		QueueDepth: s.waiting.stat(),
		Running:    s.running.stat(),
		KVCache:    s.kv.stat(),
		StageMeans: stageMeansMS(s.stages),
	}
	if s.last != nil {
		out.Dialect = s.last.Dialect
		out.Source = s.last.Source
		out.LastStale = s.last.Stale
		out.LastError = s.last.Error
		out.LastTime = s.last.Time
	}
	out.QueueSlope, _, _ = s.queueSlope(now, time.Minute)
	return out
}

// window returns the count-weighted server stage means and the mean queue
// depth over the slots in [from, to] of r.
func windowServer(r *ring[serverSlot], from, to int64) (map[string]float64, float64, bool) {
	merged := make(map[string]*stageMean)
	var wsum float64
	var wn int64
	r.each(from, to, func(sl *serverSlot) {
		for name, m := range sl.stages {
			acc := merged[name]
			if acc == nil {
				acc = &stageMean{}
				merged[name] = acc
			}
			acc.count += m.count
			acc.wsum += m.wsum
		}
		wsum += sl.waitSum
		wn += sl.waitN
	})
	if wn == 0 {
		return stageMeansMS(merged), 0, false
	}
	return stageMeansMS(merged), wsum / float64(wn), true
}

// windowTraffic merges the traffic of the slots in [from, to] of r.
func windowTraffic(r *ring[serverSlot], from, to int64) Traffic {
	var acc trafficAcc
	r.each(from, to, func(sl *serverSlot) { acc.merge(&sl.traffic) })
	return acc.stats()
}

// markerState counts markers by kind and keeps the most recent ones.
type markerState struct {
	counts map[event.MarkerKind]int64
	causes map[event.StallCause]int64
	recent []event.Marker // ring
	next   int
	total  int64
}

func newMarkerState(keep int) markerState {
	return markerState{counts: make(map[event.MarkerKind]int64), causes: make(map[event.StallCause]int64), recent: make([]event.Marker, 0, keep)}
}

func (m *markerState) add(x *event.Marker) {
	bump(m.counts, x.Kind, "other")
	if x.Kind == event.MarkerStall && x.Cause != "" {
		bump(m.causes, x.Cause, "other")
	}
	m.total++
	if len(m.recent) < cap(m.recent) {
		m.recent = append(m.recent, *x)
		return
	}
	m.recent[m.next] = *x
	m.next = (m.next + 1) % len(m.recent)
}

// Markers is the marker section of a snapshot.
type Markers struct {
	Counts map[event.MarkerKind]int64 `json:"counts"`
	// StallCauses counts the stall markers by the cause their evidence
	// points to.
	StallCauses map[event.StallCause]int64 `json:"stall_causes,omitempty"`
	// Stalls totals the stall markers of each cause: the pauses they hold
	// and their time. Every sentence about them states these figures.
	Stalls map[event.StallCause]StallTotal `json:"stall_totals,omitempty"`
	// Recent holds the latest markers to arrive, in time order: a marker
	// can arrive after later ones (a stall is reported once it is over).
	Recent []event.Marker `json:"recent"`
}

// MarkerRun is a run of markers listed as one: a stall marker followed by
// others of the same cause with nothing between them, or any other marker
// alone. Marker is the newest of the run.
type MarkerRun struct {
	event.Marker
	Count int       // markers in the run (1: alone)
	First time.Time // the oldest one's time
}

// FoldStalls folds each run of consecutive stall markers of one cause into
// its newest, counted; ms must be in time order, and so is the result.
// Under a steady load the same pause recurs every batch (a prefill wave a
// second), and a line per pause would hide every other marker.
func FoldStalls(ms []event.Marker) []MarkerRun {
	out := make([]MarkerRun, 0, len(ms))
	for _, m := range ms {
		if n := len(out); n > 0 && m.Kind == event.MarkerStall && m.Cause != "" &&
			out[n-1].Kind == m.Kind && out[n-1].Cause == m.Cause {
			out[n-1].Marker = m
			out[n-1].Count++
			continue
		}
		out = append(out, MarkerRun{Marker: m, Count: 1, First: m.Time})
	}
	return out
}

// CountsText says how many markers of each kind there were, the stalls by
// cause: "gap 2, stall 3 (prefill interference 2, probe starved 1)".
func (m Markers) CountsText() string {
	var parts []string
	for _, k := range sortedKeys(m.Counts) {
		part := fmt.Sprintf("%s %d", k, m.Counts[k])
		if k == event.MarkerStall && len(m.StallCauses) > 0 {
			var causes []string
			for _, c := range sortedKeys(m.StallCauses) {
				causes = append(causes, fmt.Sprintf("%s %d", strings.ReplaceAll(string(c), "_", " "), m.StallCauses[c]))
			}
			part += " (" + strings.Join(causes, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

func (m *markerState) stats() Markers {
	out := Markers{
		Counts: make(map[event.MarkerKind]int64, len(m.counts)),
		Recent: make([]event.Marker, 0, len(m.recent)),
	}
	for k, v := range m.counts {
		out.Counts[k] = v
	}
	if len(m.causes) > 0 {
		out.StallCauses = make(map[event.StallCause]int64, len(m.causes))
		for k, v := range m.causes {
			out.StallCauses[k] = v
		}
	}
	out.Recent = append(out.Recent, m.recent[m.next:]...)
	out.Recent = append(out.Recent, m.recent[:m.next]...)
	slices.SortStableFunc(out.Recent, func(a, b event.Marker) int { return a.Time.Compare(b.Time) })
	return out
}
