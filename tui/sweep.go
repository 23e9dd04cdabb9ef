package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/sweep"
)

// The sweep panel plots throughput (x, ok/s) against latency (y, ms, on a
// log scale: a sweep's TTFT spans decades once the queue grows), one point
// per step and series, so the curve's hockey stick is the server's
// capacity: past it, throughput stops moving and latency climbs a wall.
// Under the plot the knee and the max load are marked on the x axis.

// sweepSeries is one latency plotted per step: its glyph for a finished
// step, a hollow one for the running step, and its value.
type sweepSeries struct {
	name         string
	glyph, open  rune
	style        func(*styles) ink
	value        func(*sweep.Step) float64
	sloFamily    string // the SLO metric family its limit line belongs to
	sloStatistic string
}

// sweepSeriesList is drawn in this order, so where two points share a cell
// the later one shows.
var sweepSeriesList = []sweepSeries{
	{"ITL p99", '◆', '◇', func(s *styles) ink { return s.accent }, func(s *sweep.Step) float64 { return s.ITL.P99 }, "itl", "p99"},
	{"TTFT p50", '●', '○', func(s *styles) ink { return s.p50 }, func(s *sweep.Step) float64 { return s.TTFT.P50 }, "ttft", "p50"},
	{"TTFT p99", '▲', '△', func(s *styles) ink { return s.p99 }, func(s *sweep.Step) float64 { return s.TTFT.P99 }, "ttft", "p99"},
}

// Sweep panel geometry: the y labels' width, and the lines around the
// plot besides the findings (title, x axis, its labels, the marks, legend).
const (
	sweepYLabelW   = 6
	sweepFixedRows = 5
	sweepMinPlot   = 3
)

// renderSweep draws the sweep panel width × height: the plot when there is
// room, and always the title and the findings.
func renderSweep(st *styles, p *sweep.Progress, objectives []aggregate.Objective, width, height int) []string {
	if width <= 0 || height <= 0 {
		return nil
	}
	lines := []string{rule(st, sweepTitle(st, p), width)}
	findings := sweepFindings(st, &p.Result, width)
	plotH := height - sweepFixedRows - len(findings)
	if plotH < sweepMinPlot || width < sweepYLabelW+12 {
		return pad(append(lines, findings...), height)
	}
	pts := sweepPoints(p)
	if len(pts) == 0 {
		empty := " no step measured yet"
		if len(p.Result.Steps) > 0 {
			empty = " " + sweep.NoSuccessNote // steps ran, but measured nothing to plot
		}
		lines = append(lines, fit(st.dim.Render(empty), width))
		return pad(append(lines, findings...), height)
	}
	pl := newSweepPlot(pts, sweepLimits(objectives), width-sweepYLabelW-1, plotH)
	lines = append(lines, pl.render(st, &p.Result)...)
	lines = append(lines, fit(" "+sweepLegend(st, sweepLimits(objectives), p.Current != nil), width))
	return pad(append(lines, findings...), height)
}

// sweepPoint is one step on the plot.
type sweepPoint struct {
	step *sweep.Step
	live bool
}

// sweepPoints returns the finished steps with requests measured, and the
// running step once it has some.
func sweepPoints(p *sweep.Progress) []sweepPoint {
	var out []sweepPoint
	for i := range p.Result.Steps {
		if s := &p.Result.Steps[i]; s.OK > 0 && !s.Interrupted {
			out = append(out, sweepPoint{step: s})
		}
	}
	if c := p.Current; c != nil && c.Step.OK > 0 {
		out = append(out, sweepPoint{step: &c.Step, live: true})
	}
	return out
}

// sweepLimit is an SLO limit drawn as a line.
type sweepLimit struct {
	label string // "ttft.p99<200ms"
	ms    float64
}

// sweepLimits returns the latency objectives on a plotted series.
func sweepLimits(objectives []aggregate.Objective) []sweepLimit {
	var out []sweepLimit
	for _, o := range objectives {
		fam, stat, _ := strings.Cut(o.Metric, ".")
		for _, s := range sweepSeriesList {
			if s.sloFamily == fam && s.sloStatistic == stat {
				out = append(out, sweepLimit{label: o.String(), ms: o.Value})
			}
		}
	}
	return out
}

// sweepPlot is the plot's grid and scales.
type sweepPlot struct {
	w, h        int
	xMax        float64 // ok/s at the right edge
	yLo, yHi    float64 // ms at the bottom and top (decades)
	cells       [][]sweepCell
	pts         []sweepPoint
	limits      []sweepLimit
	kneeX, maxX int // columns of the knee and max load, -1 for none
}

type sweepCell struct {
	r     rune
	style func(*styles) ink
}

func newSweepPlot(pts []sweepPoint, limits []sweepLimit, w, h int) *sweepPlot {
	pl := &sweepPlot{w: w, h: h, pts: pts, limits: limits, kneeX: -1, maxX: -1}
	lo, hi := math.Inf(1), 0.0
	for _, p := range pts {
		pl.xMax = max(pl.xMax, p.step.Throughput)
		for _, s := range sweepSeriesList {
			if v := s.value(p.step); v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	for _, l := range limits {
		lo, hi = min(lo, l.ms), max(hi, l.ms)
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	pl.xMax = axisCeil(pl.xMax * 1.05)
	pl.yLo, pl.yHi = niceFloor(max(lo, 0.01)), niceCeil(hi)
	if pl.yHi <= pl.yLo {
		pl.yHi = niceCeil(pl.yLo * 2)
	}
	pl.cells = make([][]sweepCell, h)
	for i := range pl.cells {
		pl.cells[i] = make([]sweepCell, w)
	}
	return pl
}

// axisCeil rounds v up to a round number finer than niceCeil's 1-2-5, so
// the points spread over most of the axis: 53.6 → 60, not 100.
func axisCeil(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if f*p >= v {
			return f * p
		}
	}
	return 10 * p
}

// niceFloor rounds v down to 1, 2 or 5 times a power of ten.
func niceFloor(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{5, 2, 1} {
		if f*p <= v {
			return f * p
		}
	}
	return p
}

// col is the column of throughput x; row the row of v ms (0 at the top).
func (pl *sweepPlot) col(x float64) int {
	return min(max(int(math.Round(x/pl.xMax*float64(pl.w-1))), 0), pl.w-1)
}

func (pl *sweepPlot) row(v float64) int {
	f := (math.Log10(v) - math.Log10(pl.yLo)) / (math.Log10(pl.yHi) - math.Log10(pl.yLo))
	return pl.h - 1 - min(max(int(math.Round(f*float64(pl.h-1))), 0), pl.h-1)
}

func (pl *sweepPlot) set(row, col int, r rune, style func(*styles) ink) {
	pl.cells[row][col] = sweepCell{r, style}
}

func (pl *sweepPlot) render(st *styles, res *sweep.Result) []string {
	faint := func(s *styles) ink { return s.faint }
	slo := func(s *styles) ink { return s.slo }
	if res.Knee != nil {
		if s := res.Step(res.Knee.Step); s != nil {
			pl.kneeX = pl.col(s.Throughput)
			for r := range pl.h {
				pl.set(r, pl.kneeX, '┊', faint)
			}
		}
	}
	if res.MaxLoad != nil {
		pl.maxX = pl.col(res.MaxLoad.Throughput)
	}
	for _, l := range pl.limits {
		r := pl.row(l.ms)
		for c := range pl.w {
			pl.set(r, c, '┄', slo)
		}
	}
	for _, s := range sweepSeriesList {
		for _, p := range pl.pts {
			v := s.value(p.step)
			if !(v > 0) {
				continue
			}
			g := s.glyph
			if p.live {
				g = s.open
			}
			pl.set(pl.row(v), pl.col(p.step.Throughput), g, s.style)
		}
	}
	lines := make([]string, 0, pl.h+3)
	for r := range pl.h {
		lines = append(lines, pl.yLabel(st, r)+pl.rowText(st, r))
	}
	return append(lines, pl.xAxis(st)...)
}

// yLabel labels the plot's top and bottom rows and the rows where a
// decade lands.
func (pl *sweepPlot) yLabel(st *styles, r int) string {
	label := ""
	switch r {
	case 0:
		label = msLabel(pl.yHi)
	case pl.h - 1:
		label = msLabel(pl.yLo)
	}
	for d := math.Pow(10, math.Ceil(math.Log10(pl.yLo))); d < pl.yHi; d *= 10 {
		if pl.row(d) == r && r > 0 && r < pl.h-1 {
			label = msLabel(d)
		}
	}
	return st.faint.Render(fmt.Sprintf("%*s┤", sweepYLabelW, label))
}

// msLabel formats an axis value in milliseconds: 0.5, 20, 2000, 10s.
func msLabel(v float64) string {
	if v >= 10000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "s"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (pl *sweepPlot) rowText(st *styles, r int) string {
	var b strings.Builder
	for _, c := range pl.cells[r] {
		if c.r == 0 {
			b.WriteByte(' ')
			continue
		}
		b.WriteString(c.style(st).Render(string(c.r)))
	}
	return b.String()
}

// xAxis is the axis line, its tick labels, and the max load and knee
// under their columns (the later one moved right when they would touch).
func (pl *sweepPlot) xAxis(st *styles) []string {
	axis := []rune(strings.Repeat("─", pl.w))
	labels := []rune(strings.Repeat(" ", pl.w))
	const ticks = 4
	for i := range ticks + 1 {
		v := pl.xMax * float64(i) / ticks
		c := pl.col(v)
		axis[c] = '┬'
		text := []rune(axisLabel(v))
		copy(labels[min(max(c-len(text)/2, 0), pl.w-len(text)):], text)
	}
	marks := []rune(strings.Repeat(" ", pl.w))
	next := 0
	for _, m := range []struct {
		col  int
		text string
	}{{pl.maxX, "▴max"}, {pl.kneeX, "▴knee"}} {
		if m.col < 0 {
			continue
		}
		t := []rune(m.text)
		at := min(max(m.col, next), pl.w-len(t))
		if at < next {
			continue // no room left
		}
		copy(marks[at:], t)
		next = at + len(t) + 1
	}
	return []string{
		st.faint.Render(fmt.Sprintf("%*s└", sweepYLabelW, "ms") + string(axis)),
		st.faint.Render(fmt.Sprintf("%*s ", sweepYLabelW, "ok/s") + string(labels)),
		st.accent.Render(strings.Repeat(" ", sweepYLabelW+1) + string(marks)),
	}
}

func sweepTitle(st *styles, p *sweep.Progress) string {
	t := st.title.Render("sweep")
	n := len(p.Result.Steps)
	switch c := p.Current; {
	case c != nil:
		t += fmt.Sprintf(" · step %d: %s · %s %s", c.Step.Index, c.Step.Load, c.Phase, clockShort(c.Elapsed))
	case p.Done && p.Result.Failure != "":
		t += " · failed: " + p.Result.Failure
	case p.Done:
		t += fmt.Sprintf(" · done, %d steps: %s", n, p.Result.Stopped)
	default:
		t += fmt.Sprintf(" · %d steps", n)
	}
	return t
}

func sweepLegend(st *styles, limits []sweepLimit, running bool) string {
	var parts []string
	for _, s := range sweepSeriesList {
		parts = append(parts, s.style(st).Render(string(s.glyph))+" "+s.name)
	}
	for _, l := range limits {
		parts = append(parts, st.slo.Render("┄")+" "+l.label)
	}
	if running {
		parts = append(parts, st.dim.Render("hollow: running"))
	}
	return strings.Join(parts, "  ")
}

// sweepFindings is the max load, knee and saturation on one line, or on
// two when one is too narrow.
func sweepFindings(st *styles, r *sweep.Result, width int) []string {
	f := func(name string, x *sweep.Finding, text func(*sweep.Finding) string) string {
		if x == nil {
			return st.dim.Render(name + " -")
		}
		return st.dim.Render(name+" ") + st.bold.Render(text(x))
	}
	load := func(x *sweep.Finding) string { return fmt.Sprintf("%s (%s ok/s)", x.Load, rate(x.Throughput)) }
	parts := []string{
		f("max load", r.MaxLoad, load),
		f("knee", r.Knee, load),
		f("saturation", r.Saturation, func(x *sweep.Finding) string { return rate(x.Throughput) + " ok/s" }),
	}
	sep := st.faint.Render(" · ")
	if one := " " + strings.Join(parts, sep); visibleWidth(one) <= width {
		return []string{one}
	}
	return []string{fit(" "+parts[0]+sep+parts[1], width), fit(" "+parts[2], width)}
}
