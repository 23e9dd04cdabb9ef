package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/NimbleMarkets/ntcharts/canvas"

	"github.com/latscope/latscope/aggregate"
)

// chartKind names one of the time series charts, in the order they are
// dropped when height runs short (last first).
type chartKind int

const (
	chartTTFT chartKind = iota
	chartQueue
	chartITL
	chartTokens
	numCharts
)

// series is one line of a chart: its name, style and value at a point.
type series struct {
	name  string
	style ink
	value func(point) float64
}

// chartSpec says what a chart plots.
type chartSpec struct {
	title string
	// windowed: each point is a statistic over aggregate.SeriesWindow
	// (the latency percentiles, the token rate); else a latest reading.
	windowed bool
	metric   string // SLO family drawn as a limit line ("ttft", "itl"), if any
	series   []series
	unitFn   func(float64) string
}

func chartSpecs(st *styles) [numCharts]chartSpec {
	return [numCharts]chartSpec{
		chartTTFT: {title: "TTFT ms", windowed: true, metric: "ttft", unitFn: ms, series: []series{
			{"p50", st.p50, func(p point) float64 { return p.ttft50 }},
			{"p99", st.p99, func(p point) float64 { return p.ttft99 }},
		}},
		chartQueue: {title: "queue", unitFn: func(v float64) string { return fmt.Sprintf("%.0f", v) }, series: []series{
			{"waiting", st.waiting, func(p point) float64 { return p.waiting }},
			{"running", st.running, func(p point) float64 { return p.running }},
			{"in flight", st.inFlight, func(p point) float64 { return p.inFlight }},
		}},
		chartITL: {title: "ITL ms", windowed: true, metric: "itl", unitFn: ms, series: []series{
			{"p50", st.p50, func(p point) float64 { return p.itl50 }},
			{"p99", st.p99, func(p point) float64 { return p.itl99 }},
		}},
		chartTokens: {title: "output tok/s", windowed: true, unitFn: rate, series: []series{
			{"tok/s", st.tokens, func(p point) float64 { return p.tokPerSec }},
		}},
	}
}

// charts draws the time series, and only when a new second of history
// arrived or the size or window changed: its X resolution is one second
// anyway. The drawn strings are kept for View.
type charts struct {
	specs [numCharts]chartSpec
	plots [numCharts]plot
	views [numCharts][]string
	key   chartKey
	draws int // how many times the charts were drawn (tests, benchmarks)
}

// chartKey is everything a drawing depends on.
type chartKey struct {
	last       int64
	window     aggregate.Window
	width, h   int
	n          int
	begin      time.Time
	objectives int
}

func newCharts(st *styles) *charts { return &charts{specs: chartSpecs(st)} }

// update redraws the first n charts at width × h lines each when anything
// they show changed.
func (c *charts) update(st *styles, hist *history, w aggregate.Window, begin time.Time, objectives []aggregate.Objective, n, width, h int) {
	key := chartKey{last: hist.last, window: w, width: width, h: h, n: n, begin: begin, objectives: len(objectives)}
	if key == c.key {
		return
	}
	c.key = key
	c.draws++
	for k := range chartKind(numCharts) {
		if int(k) >= n || width < 20 || h < 4 {
			c.views[k] = nil
			continue
		}
		c.views[k] = c.draw(st, k, hist, w, begin, objectives, width, h)
	}
}

func (c *charts) draw(st *styles, k chartKind, hist *history, w aggregate.Window, begin time.Time, objectives []aggregate.Objective, width, h int) []string {
	spec := &c.specs[k]
	lo, hi := hist.first(w), hist.last
	if hi <= lo {
		lo = hi - 1
	}
	limit, hasLimit := sloLimit(objectives, spec.metric)
	top := 0.0
	lastVals := make([]float64, len(spec.series))
	lines := make([]plotLine, len(spec.series), len(spec.series)+1)
	inks := []ink{plotBlank: {}, plotAxis: st.faint}
	for i, s := range spec.series {
		lastVals[i] = math.NaN()
		lines[i] = plotLine{name: s.name, ink: plotFirstLine + uint8(i)}
		inks = append(inks, s.style)
	}
	hist.points(w, func(p point) {
		for i, s := range spec.series {
			if v := s.value(p); !math.IsNaN(v) {
				top = max(top, v)
				lastVals[i] = v
				lines[i].pts = append(lines[i].pts, canvas.Float64Point{X: float64(p.sec), Y: v})
			}
		}
	})
	lines = slices.DeleteFunc(lines, func(l plotLine) bool { return len(l.pts) == 0 })
	if hasLimit {
		top = max(top, limit)
		lines = append(lines, plotLine{name: "slo", ink: uint8(len(inks)), pts: []canvas.Float64Point{{X: float64(lo), Y: limit}, {X: float64(hi), Y: limit}}})
		inks = append(inks, st.slo)
	}
	top = niceCeil(top * 1.1)
	frame := plotFrame{
		lo: float64(lo), hi: float64(hi), top: top,
		xStep: max(width/4, 8), yStep: 2,
		xLabel: func(v float64) string { return clockShort(time.Unix(int64(v), 0).Sub(begin)) },
		yLabel: axisLabel,
	}
	pl := &c.plots[k]
	pl.draw(width, h-1, frame, lines) // h-1: the title line
	return append([]string{chartTitle(st, spec, lastVals, limit, hasLimit, w, width)}, pl.lines(inks)...)
}

func chartTitle(st *styles, spec *chartSpec, last []float64, limit float64, hasLimit bool, w aggregate.Window, width int) string {
	var b strings.Builder
	b.WriteString(st.title.Render(spec.title))
	for i, s := range spec.series {
		v := "-"
		if !math.IsNaN(last[i]) {
			v = spec.unitFn(last[i])
		}
		b.WriteString("  " + s.style.Render("━") + " " + s.name + " " + v)
	}
	if hasLimit {
		b.WriteString("  " + st.slo.Render("━") + " SLO " + spec.unitFn(limit))
	}
	// The window note in words if it fits, else shorter, rather than cut.
	note := "  (" + chartWindow(spec, w, false) + ")"
	if visibleWidth(b.String())+len(note) > width {
		note = " (" + chartWindow(spec, w, true) + ")"
	}
	if visibleWidth(b.String())+len(note) > width {
		// Latest readings claim no window: the axis shows their span.
		note = ""
		if spec.windowed {
			note = " (" + aggregate.SeriesWindow.String() + "/" + strings.TrimPrefix(chartWindow(spec, w, true), aggregate.SeriesWindow.String()+" win, ") + ")"
		}
	}
	b.WriteString(st.dim.Render(note))
	return b.String()
}

// chartWindow names what a chart shows: the window each point summarises
// and the span of seconds drawn, "10s window, last 1m" or "whole run"
// ("10s win, 1m" short). The span is the selected window's; its points
// are SeriesWindow's whatever the span.
func chartWindow(spec *chartSpec, w aggregate.Window, short bool) string {
	span, win := "last "+w.String(), " window, "
	switch {
	case w == aggregate.WinRun && short:
		span = "run"
	case w == aggregate.WinRun:
		span = "whole run"
	case short:
		span = w.String()
	}
	if short {
		win = " win, "
	}
	if !spec.windowed {
		return span
	}
	return aggregate.SeriesWindow.String() + win + span
}

// sloLimit returns the limit of the first objective on a percentile of
// metric, for a line on its chart.
func sloLimit(objectives []aggregate.Objective, metric string) (float64, bool) {
	if metric == "" {
		return 0, false
	}
	for _, o := range objectives {
		if fam, _, _ := strings.Cut(o.Metric, "."); fam == metric {
			return o.Value, true
		}
	}
	return 0, false
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so axis labels
// are round.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 2, 5, 10} {
		if f*p >= v {
			return f * p
		}
	}
	return 10 * p
}

// clockShort formats a time since the session start for an axis: "4:12".
func clockShort(d time.Duration) string {
	s := int64(d / time.Second)
	if s < 0 {
		return ""
	}
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// axisLabel formats a Y axis value compactly: "0", "400", "2.5k".
func axisLabel(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.1fk", v/1000)
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
