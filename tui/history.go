package tui

import (
	"math"
	"time"

	"github.com/latscope/latscope/aggregate"
)

// point is one second of the charts' history. Latencies and the token rate
// are those of aggregate.SeriesWindow ending at that second (ms); NaN where
// there was no data. Queue figures are the latest readings.
type point struct {
	sec                        int64 // Unix seconds of the snapshot
	ttft50, ttft99             float64
	itl50, itl99               float64
	waiting, running, inFlight float64
	tokPerSec                  float64
}

func pointOf(s *aggregate.Snapshot) point {
	w := &s.Windows[aggregate.SeriesWindow]
	p := point{
		sec:    s.Now.Unix(),
		ttft50: math.NaN(), ttft99: math.NaN(), itl50: math.NaN(), itl99: math.NaN(),
		waiting: math.NaN(), running: math.NaN(), inFlight: math.NaN(),
		tokPerSec: w.TokPerSec,
	}
	if w.TTFT.Count > 0 {
		p.ttft50, p.ttft99 = w.TTFT.P50, w.TTFT.P99
	}
	if w.ITL.Count > 0 {
		p.itl50, p.itl99 = w.ITL.P50, w.ITL.P99
	}
	if s.Server.QueueDepth.Seen && !s.Server.LastStale {
		p.waiting = s.Server.QueueDepth.Last
	}
	if s.Server.Running.Seen && !s.Server.LastStale {
		p.running = s.Server.Running.Last
	}
	if s.Probe != nil {
		p.inFlight = float64(s.Probe.InFlight)
	}
	return p
}

// merge folds b (later) into a: peaks keep their peak, the rest average.
func merge(a, b point) point {
	avg := func(x, y float64) float64 {
		switch {
		case math.IsNaN(x):
			return y
		case math.IsNaN(y):
			return x
		}
		return (x + y) / 2
	}
	peak := func(x, y float64) float64 {
		if math.IsNaN(x) || y > x {
			return y
		}
		return x
	}
	return point{
		sec:    b.sec,
		ttft50: avg(a.ttft50, b.ttft50), ttft99: peak(a.ttft99, b.ttft99),
		itl50: avg(a.itl50, b.itl50), itl99: peak(a.itl99, b.itl99),
		waiting: avg(a.waiting, b.waiting), running: avg(a.running, b.running),
		inFlight: avg(a.inFlight, b.inFlight), tokPerSec: avg(a.tokPerSec, b.tokPerSec),
	}
}

// Bounds of the history: one point per second for the longest window, and
// the whole run in at most runPoints points.
const (
	recentPoints = 300
	runPoints    = 240
)

// history keeps the charts' points in fixed memory: a ring of the last
// recentPoints seconds, and the whole run downsampled (when runPoints fill
// up, neighbours merge and each point covers twice as long).
type history struct {
	recent [recentPoints]point
	n      int // points in recent (≤ recentPoints)
	head   int // index of the next write
	run    []point
	step   int64 // seconds per run point
	last   int64 // last second recorded
}

func newHistory() *history { return &history{run: make([]point, 0, runPoints), step: 1} }

// add records s if it is in a later second than the last one recorded. A
// snapshot from an earlier second (a replay seeking back) starts over.
func (h *history) add(s *aggregate.Snapshot) bool {
	if s.Now.IsZero() {
		return false
	}
	p := pointOf(s)
	if h.n > 0 && p.sec <= h.last {
		if p.sec == h.last {
			return false
		}
		*h = history{run: h.run[:0], step: 1}
	}
	h.last = p.sec
	h.recent[h.head] = p
	h.head = (h.head + 1) % recentPoints
	h.n = min(h.n+1, recentPoints)
	h.addRun(p)
	return true
}

func (h *history) addRun(p point) {
	if k := len(h.run); k > 0 && p.sec/h.step == h.run[k-1].sec/h.step {
		h.run[k-1] = merge(h.run[k-1], p)
		return
	}
	if len(h.run) == runPoints {
		h.step *= 2
		j := 0
		for i := 0; i < len(h.run); i++ {
			if j > 0 && h.run[i].sec/h.step == h.run[j-1].sec/h.step {
				h.run[j-1] = merge(h.run[j-1], h.run[i])
				continue
			}
			h.run[j] = h.run[i]
			j++
		}
		h.run = h.run[:j]
	}
	h.run = append(h.run, p)
}

// points calls fn for the points in the span of window w (aggregate's
// Window.Span; the whole run for WinRun), oldest first.
func (h *history) points(w aggregate.Window, fn func(point)) {
	if w == aggregate.WinRun {
		for _, p := range h.run {
			fn(p)
		}
		return
	}
	from := h.last - int64(w.Span()/time.Second) + 1
	for i := h.n; i > 0; i-- {
		p := h.recent[(h.head-i+recentPoints)%recentPoints]
		if p.sec >= from {
			fn(p)
		}
	}
}

// first returns the oldest second of window w's points.
func (h *history) first(w aggregate.Window) int64 {
	if w == aggregate.WinRun && len(h.run) > 0 {
		return h.run[0].sec
	}
	return h.last - int64(w.Span()/time.Second) + 1
}

// gpuHistoryLen is how many samples each GPU sparkline shows.
const gpuHistoryLen = 60

// gpuHistory keeps the last gpuHistoryLen utilisation and memory readings
// of each GPU, by device position.
type gpuHistory struct {
	last time.Time
	util [][gpuHistoryLen]float64
	mem  [][gpuHistoryLen]float64
	n    int
	head int
}

func (g *gpuHistory) add(s *aggregate.Snapshot) {
	x := s.GPU
	if x == nil || !x.Available || !x.Time.After(g.last) {
		return
	}
	g.last = x.Time
	if len(g.util) != len(x.Devices) {
		*g = gpuHistory{last: x.Time, util: make([][gpuHistoryLen]float64, len(x.Devices)), mem: make([][gpuHistoryLen]float64, len(x.Devices))}
	}
	for i, d := range x.Devices {
		g.util[i][g.head] = float64(d.UtilGPU) / 100
		if d.MemTotal > 0 {
			g.mem[i][g.head] = float64(d.MemUsed) / float64(d.MemTotal)
		}
	}
	g.head = (g.head + 1) % gpuHistoryLen
	g.n = min(g.n+1, gpuHistoryLen)
}

// series returns device i's last k readings of util (or memory), oldest first.
func (g *gpuHistory) series(dst []float64, i, k int, mem bool) []float64 {
	if i >= len(g.util) {
		return dst[:0]
	}
	src := &g.util[i]
	if mem {
		src = &g.mem[i]
	}
	k = min(k, g.n)
	dst = dst[:0]
	for j := k; j > 0; j-- {
		dst = append(dst, src[(g.head-j+gpuHistoryLen)%gpuHistoryLen])
	}
	return dst
}
