package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// An xyChart is latency against throughput: one group of markers per
// window of a run or step of a sweep, each series with its own marker
// shape and dash, so the chart reads without colour; a sweep's steps are
// joined in order of load, and its findings (knee, max load) are vertical
// marks at their step's throughput, named in words.
type xyChart struct {
	ID                       string
	Title, XLabel, YLabel    string
	Simulated                bool
	Width, Height            float64
	Left, Right, Top, Bottom float64
	MidX, MidY               float64 // where the axis titles are centred
	XTicks, YTicks           []tick
	Legend                   []xyLegend
	Lines                    []xyLine  // the series joined, in order of load
	Groups                   []xyGroup // one per window or step
	Marks                    []xyMark
	Note                     string // under the chart: what a point is
	Empty                    string

	xTop, yTop float64 // the axes' ends, in data units
}

type xyLegend struct {
	Name, Stroke, Dash string
	Line               bool // the points are joined: the legend shows the line too
	X                  float64
	Marker             string // the marker's path, drawn on the legend's line
}

type xyLine struct{ Path, Stroke, Dash string }

// xyGroup is one window or step: its markers and a tooltip with its
// figures.
type xyGroup struct {
	Class   string // "window" or "step"
	Step    string // the sweep step's index; empty for a window
	Title   string
	Markers []xyMarker
}

type xyMarker struct {
	D    string // the marker's path
	Fill string
}

// xyMark is a finding drawn at its step: a vertical line and its name.
type xyMark struct {
	Class        string // "knee", "max-load"
	Step         string
	Title        string
	X            float64
	Dash         string
	Label        string
	LabelX       float64
	LabelY       float64
	Anchor       string // the label's text-anchor: start, or end near the right edge
	MarkerD      string // a ring around the step's point
	MarkerStroke string
}

// xySeries is one latency of the points, drawn with its own marker.
type xySeries struct {
	name, stroke, dash string
	shape              string // "circle", "square" or "triangle"
}

// xyPoint is one window or step: its throughput, its latencies (one per
// series, NaN where not measured), and what its tooltip and group say.
type xyPoint struct {
	x     float64
	ys    []float64
	title string
	class string
	step  string
}

// xyPlot lays out points on axes from zero to round numbers above the
// largest values; join draws each series as a line through its points in
// the order given.
func xyPlot(id, title, xLabel, yLabel string, simulated bool, series []xySeries, points []xyPoint, join bool) xyChart {
	c := xyChart{ID: id, Title: title, XLabel: xLabel, YLabel: yLabel, Simulated: simulated,
		Width: chartWidth, Height: 400, Left: 70, Right: chartWidth - 40, Top: 60, Bottom: 340}
	c.MidX, c.MidY = (c.Left+c.Right)/2, (c.Top+c.Bottom)/2
	var hiX, hiY float64
	seen := false
	for _, p := range points {
		for _, y := range p.ys {
			if usable(y) && usable(p.x) {
				hiX, hiY, seen = max(hiX, p.x), max(hiY, y), true
			}
		}
	}
	if !seen {
		c.Height, c.Empty = 90, "No data for this chart in the recording."
		return c
	}
	var xValues, yValues []float64
	xValues, c.xTop = niceTicks(hiX*1.05, 10)
	// Headroom above the highest point keeps it clear of the marks' labels.
	yValues, c.yTop = niceTicks(hiY*1.15, 6)
	for _, v := range xValues {
		c.XTicks = append(c.XTicks, tick{Pos: c.px(v), Label: tickLabel(v)})
	}
	for _, v := range yValues {
		c.YTicks = append(c.YTicks, tick{Pos: c.py(v), Label: tickLabel(v)})
	}
	legendX := c.Left
	for _, s := range series {
		c.Legend = append(c.Legend, xyLegend{Name: s.name, Stroke: s.stroke, Dash: s.dash, Line: join, X: legendX,
			Marker: markerPath(s.shape, legendX+16, 36)})
		legendX += 40 + float64(len(s.name))*charWidth + 24
	}
	paths := make([]strings.Builder, len(series))
	for _, p := range points {
		g := xyGroup{Class: p.class, Step: p.step, Title: p.title}
		for i, s := range series {
			if i >= len(p.ys) || !usable(p.ys[i]) || !usable(p.x) {
				continue
			}
			x, y := c.px(p.x), c.py(p.ys[i])
			g.Markers = append(g.Markers, xyMarker{D: markerPath(s.shape, x, y), Fill: s.stroke})
			cmd := "L"
			if paths[i].Len() == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&paths[i], "%s%.1f %.1f ", cmd, x, y)
		}
		if len(g.Markers) > 0 {
			c.Groups = append(c.Groups, g)
		}
	}
	if join {
		for i, s := range series {
			if d := strings.TrimSpace(paths[i].String()); strings.Contains(d, "L") {
				c.Lines = append(c.Lines, xyLine{Path: d, Stroke: s.stroke, Dash: s.dash})
			}
		}
	}
	return c
}

func usable(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

func (c *xyChart) px(x float64) float64 { return c.Left + x/c.xTop*(c.Right-c.Left) }
func (c *xyChart) py(y float64) float64 { return c.Bottom - y/c.yTop*(c.Bottom-c.Top) }

// mark draws a finding at throughput x, where the point of its step is:
// a vertical line over the plot, its label near the top (the n-th mark's a
// line lower, so marks at one step stay readable) and a ring at ringY.
func (c *xyChart) mark(class, step, label, title, dash string, x, ringY float64) {
	if c.Empty != "" || !usable(x) {
		return
	}
	m := xyMark{Class: class, Step: step, Title: title, X: c.px(x), Dash: dash, Label: label,
		LabelY: c.Top + 12 + 15*float64(len(c.Marks)), Anchor: "start", MarkerStroke: "#1a1a1a"}
	m.LabelX = m.X + 5
	if m.X+5+float64(len(label))*charWidth > c.Width || len(c.Marks) > 0 && c.Marks[0].Anchor == "end" {
		m.LabelX, m.Anchor = m.X-5, "end"
		// Every label on one side of its line: a label that starts at one
		// line and one that ends at another would read as the other's.
		for i := range c.Marks {
			c.Marks[i].LabelX, c.Marks[i].Anchor = c.Marks[i].X-5, "end"
		}
	}
	if usable(ringY) {
		m.MarkerD = markerPath("ring", m.X, c.py(ringY))
	}
	c.Marks = append(c.Marks, m)
}

// markerPath is the outline of a marker centred at (x, y): shapes that
// differ without colour.
func markerPath(shape string, x, y float64) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	switch shape {
	case "square":
		return "M" + f(x-4) + " " + f(y-4) + " h8 v8 h-8 Z"
	case "triangle":
		return "M" + f(x) + " " + f(y-5.5) + " L" + f(x+5) + " " + f(y+3.5) + " L" + f(x-5) + " " + f(y+3.5) + " Z"
	case "ring":
		return "M" + f(x-9) + " " + f(y) + " a9 9 0 1 0 18 0 a9 9 0 1 0 -18 0 Z"
	}
	return "M" + f(x-4.5) + " " + f(y) + " a4.5 4.5 0 1 0 9 0 a4.5 4.5 0 1 0 -9 0 Z"
}

// windowPoints are the points of s whose windows do not overlap: every
// k-th, k the window's span over the step, so no request counts in two.
func windowPoints(s Series) []Point {
	if s.Step <= 0 {
		return nil
	}
	k := max(int((s.Window.Span()+s.Step-1)/s.Step), 1)
	var out []Point
	for i := k - 1; i < len(s.Points); i += k {
		out = append(out, s.Points[i])
	}
	return out
}

// throughputAxis picks the x axis: output tokens per second when any
// point produced tokens, else completed requests per second.
func throughputAxis(anyTokens bool) (label, unit string, tokens bool) {
	if anyTokens {
		return "achieved output throughput (tokens/s)", "tok/s", true
	}
	return "achieved throughput (completed requests/s)", "ok/s", false
}

// Marker shapes and dashes of the latency series: p50 a solid line of
// circles, p99 a dashed one of squares, ITL a dotted one of triangles.
var (
	ttftP50Series = xySeries{name: "TTFT p50", stroke: blue, shape: "circle"}
	ttftP99Series = xySeries{name: "TTFT p99", stroke: vermillion, dash: dashed, shape: "square"}
	itlP99Series  = xySeries{name: "ITL p99", stroke: green, dash: dotted, shape: "triangle"}
)

// latencyThroughputChart is a run's TTFT against its throughput, one point
// per window of the series, none overlapping.
func latencyThroughputChart(id string, rec *Recording) xyChart {
	pts := windowPoints(rec.Series)
	anyTokens := false
	for _, p := range pts {
		anyTokens = anyTokens || p.TokPerSec > 0
	}
	xLabel, unit, tokens := throughputAxis(anyTokens)
	win := windowWords(rec.Series.Window)
	var points []xyPoint
	for _, p := range pts {
		x := p.OKPerSec
		if tokens {
			x = p.TokPerSec
		}
		from := max(p.At-rec.Series.Window.Span(), 0)
		points = append(points, xyPoint{x: x, ys: []float64{p.TTFTP50, p.TTFTP99}, class: "window",
			title: fmt.Sprintf("%s to %s s: %s %s, %s ok/s; TTFT p50 %s ms, p99 %s ms", tickLabel(from.Seconds()), tickLabel(p.At.Seconds()),
				num(x, 1), unit, num(p.OKPerSec, 2), num(p.TTFTP50, 1), num(p.TTFTP99, 1))})
	}
	c := xyPlot(id, "TTFT against throughput, p50 and p99: one point per "+win+" window of the run (ms)", xLabel, "TTFT (ms)",
		rec.Simulated(), []xySeries{ttftP50Series, ttftP99Series}, points, false)
	c.Note = "Each window of " + win + " is one point (its p50 a circle, its p99 a square), none overlapping: where latency climbs as throughput stops growing, the server is past its capacity."
	return c
}
