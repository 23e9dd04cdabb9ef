package tui

import (
	"slices"
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/canvas/runes"
)

// plot draws a time series chart as ntcharts' time series line chart lays
// one out (the Y axis labels' width, the axes, a label every xStep columns
// where the one before left room, lines in braille by ntcharts' own
// BrailleGrid), on a grid of runes with a colour index per cell. ntcharts'
// canvas keeps a whole lipgloss style in every cell and allocates them
// anew on every draw: drawing the four charts once a second that way was a
// fifth of what a dashboard left open cost.
type plot struct {
	w, h  int
	runes []rune
	inks  []uint8 // index into the chart's inks: plotBlank, plotAxis, then the lines'
}

const (
	plotBlank uint8 = iota // no colour
	plotAxis               // the axes and their labels
	plotFirstLine
)

// plotLine is one line of a chart: its points (Unix seconds, value),
// oldest first, and its ink.
type plotLine struct {
	name string // the lines are drawn in name order, as ntcharts does
	ink  uint8
	pts  []canvas.Float64Point
}

// plotFrame is what the axes show: the time span, the value range from 0
// to top, and how the labels read.
type plotFrame struct {
	lo, hi       float64
	top          float64
	xStep, yStep int
	xLabel       func(v float64) string
	yLabel       func(v float64) string
}

func (p *plot) reset(w, h int) {
	p.w, p.h = w, h
	if n := w * h; cap(p.runes) < n {
		p.runes, p.inks = make([]rune, n), make([]uint8, n)
	} else {
		p.runes, p.inks = p.runes[:n], p.inks[:n]
		clear(p.runes)
		clear(p.inks)
	}
}

func (p *plot) set(x, y int, r rune, ink uint8) {
	if x < 0 || y < 0 || x >= p.w || y >= p.h {
		return
	}
	p.runes[y*p.w+x], p.inks[y*p.w+x] = r, ink
}

func (p *plot) at(x, y int) rune {
	if x < 0 || y < 0 || x >= p.w || y >= p.h {
		return runes.Null
	}
	return p.runes[y*p.w+x]
}

func (p *plot) text(x, y int, s string, ink uint8) {
	for _, r := range s {
		p.set(x, y, r, ink)
		x++
	}
}

// draw lays out the chart at w × h cells. With no line to draw it stays
// blank, as ntcharts leaves a chart with no data.
func (p *plot) draw(w, h int, f plotFrame, lines []plotLine) {
	p.reset(w, h)
	if len(lines) == 0 || w <= 0 || h <= 0 {
		return
	}
	// Origin and graph size: the last two rows are the X axis and its
	// labels; the Y labels take the width of the widest.
	origin := canvas.Point{X: 0, Y: h - 2}
	gw, gh := w, h-2
	yLabels := p.yLabels(f, gh)
	for _, l := range yLabels {
		origin.X = max(origin.X, len(l.s))
	}
	gw -= origin.X + 1
	// Axes.
	p.set(origin.X, origin.Y, runes.LineUpRight, plotAxis)
	for y := origin.Y - 1; y >= 0; y-- {
		p.set(origin.X, y, runes.LineVertical, plotAxis)
	}
	for x := origin.X + 1; x < w; x++ {
		p.set(x, origin.Y, runes.LineHorizontal, plotAxis)
	}
	for _, l := range yLabels {
		p.text(origin.X-len(l.s), origin.Y-l.i, l.s, plotAxis)
	}
	p.xLabels(f, origin, gw)
	slices.SortStableFunc(lines, func(a, b plotLine) int { return strings.Compare(a.name, b.name) })
	for _, l := range lines {
		p.line(f, l, origin, gw, gh)
	}
}

type yLabel struct {
	i int // rows above the X axis
	s string
}

func (p *plot) yLabels(f plotFrame, gh int) []yLabel {
	var out []yLabel
	if f.yStep <= 0 || gh <= 0 {
		return out
	}
	last := ""
	inc := f.top / float64(gh)
	for i := 0; i <= gh; i += f.yStep {
		if s := f.yLabel(inc * float64(i)); s != last {
			out = append(out, yLabel{i, s})
			last = s
		}
	}
	return out
}

func (p *plot) xLabels(f plotFrame, origin canvas.Point, gw int) {
	if f.xStep <= 0 || gw <= 0 {
		return
	}
	last := ""
	inc := (f.hi - f.lo) / float64(gw)
	for i := 0; i < gw; i += f.xStep {
		// Only where the cell before is free, and only whole and new.
		if p.at(origin.X+i-1, origin.Y+1) != runes.Null {
			continue
		}
		s := f.xLabel(f.lo + inc*float64(i))
		if s != last && len(s)+origin.X+i <= p.w {
			p.text(origin.X+i, origin.Y+1, s, plotAxis)
			last = s
		}
	}
}

// line draws l in braille over the graph area, its dots joining those of
// the lines drawn before it in a cell it shares with them.
func (p *plot) line(f plotFrame, l plotLine, origin canvas.Point, gw, gh int) {
	if gw <= 0 || gh <= 0 {
		return
	}
	xs, ys := float64(gw)/(f.hi-f.lo), float64(origin.Y)/f.top
	grid := graph.NewBrailleGrid(gw, gh, 0, float64(gw), 0, float64(gh))
	scaled := func(q canvas.Float64Point) canvas.Float64Point {
		return canvas.Float64Point{X: (q.X - f.lo) * xs, Y: q.Y * ys}
	}
	for i := range l.pts {
		a, b := scaled(l.pts[i]), scaled(l.pts[min(i+1, len(l.pts)-1)])
		if (a.X < 0 && b.X < 0) || (a.X > float64(gw) && b.X > float64(gw)) {
			continue
		}
		for _, q := range graph.GetLinePoints(grid.GridPoint(a), grid.GridPoint(b)) {
			grid.Set(q)
		}
	}
	for y, row := range grid.BraillePatterns() {
		for x, r := range row {
			if r == runes.BrailleBlockOffset || !runes.IsBraillePattern(r) {
				continue
			}
			cx := origin.X + 1 + x
			if cur := p.at(cx, y); cur != runes.Null {
				r = runes.CombineBraillePatterns(cur, r)
			}
			p.set(cx, y, r, l.ink)
		}
	}
}

// lines returns the plot's rows, each run of cells of one ink in one
// styled span (its runes are never line breaks or tabs, which ink.Render
// would hand to lipgloss).
func (p *plot) lines(inks []ink) []string {
	out := make([]string, 0, p.h)
	var b strings.Builder
	for y := range p.h {
		b.Reset()
		row, rowInks := p.runes[y*p.w:(y+1)*p.w], p.inks[y*p.w:(y+1)*p.w]
		for x := 0; x < p.w; {
			k := rowInks[x]
			end := x
			for end < p.w && rowInks[end] == k {
				end++
			}
			paint := k != plotBlank && int(k) < len(inks)
			if paint {
				b.WriteString(inks[k].open)
			}
			for _, r := range row[x:end] {
				if r == runes.Null {
					r = ' '
				}
				b.WriteRune(r)
			}
			if paint {
				b.WriteString(inks[k].close)
			}
			x = end
		}
		out = append(out, b.String())
	}
	return out
}
