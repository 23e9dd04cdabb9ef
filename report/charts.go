package report

import (
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// The charts are computed here as plain geometry and drawn as inline SVG by
// the HTML template, which escapes every piece of text. Colours are the
// Okabe-Ito palette, which stays distinct under the common colour-vision
// deficiencies; nothing relies on colour alone: bar segments carry labels
// and a legend table, estimated stages are hatched, and lines differ in
// dash pattern and are labelled at their ends.

// Chart geometry, in SVG user units (px at 100% zoom).
const (
	chartWidth  = 1100.0
	charWidth   = 6.8 // the rough width of one 12 px character, to fit labels
	labelColumn = 190.0
)

// stageFill colours a stage as event.StageTable says: the server-side
// stages get the saturated colours, the client's own (usually tiny)
// stages shades of grey, and a stage without a fill of its own
// event.StageOther's.
func stageFill(s event.Stage) string {
	var other string
	for _, m := range event.StageTable() {
		if m.Stage == s && m.Fill != "" {
			return m.Fill
		}
		if m.Stage == event.StageOther {
			other = m.Fill
		}
	}
	return other
}

// textOn picks black or white text for fill (#rrggbb), whichever contrasts
// more by WCAG's ratio: every fill of the stage table gets at least 4.5:1
// (contrast_test.go checks it).
func textOn(fill string) string {
	if contrastRatio("#000000", fill) >= contrastRatio("#ffffff", fill) {
		return "#000"
	}
	return "#fff"
}

// contrastRatio is WCAG 2's contrast ratio of two #rgb or #rrggbb colours,
// from 1 to 21; 1 when either does not parse.
func contrastRatio(a, b string) float64 {
	la, okA := luminance(a)
	lb, okB := luminance(b)
	if !okA || !okB {
		return 1
	}
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// luminance is WCAG 2's relative luminance of a #rgb or #rrggbb colour.
func luminance(c string) (float64, bool) {
	r, g, b, ok := parseHex(c)
	if !ok {
		return 0, false
	}
	lin := func(v uint8) float64 {
		s := float64(v) / 255
		if s <= 0.03928 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b), true
}

// parseHex reads #rgb or #rrggbb.
func parseHex(c string) (r, g, b uint8, ok bool) {
	h := strings.TrimPrefix(c, "#")
	if len(h) == 3 {
		h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
	}
	if len(h) != 6 || len(c) == len(h) {
		return 0, 0, 0, false
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, 0, 0, false
	}
	return uint8(v >> 16), uint8(v >> 8), uint8(v), true
}

// tick is one labelled position on an axis.
type tick struct {
	Pos   float64
	Label string
}

// niceTicks returns about n round-numbered ticks from 0 to at least hi, and
// the top of the axis.
func niceTicks(hi float64, n int) ([]float64, float64) {
	if !(hi > 0) || math.IsInf(hi, 0) {
		hi = 1
	}
	raw := hi / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	top := math.Ceil(hi/step-1e-9) * step
	var out []float64
	for v := 0.0; v <= top+step/2; v += step {
		out = append(out, v)
	}
	return out, top
}

// tickLabel formats an axis value with as few decimals as its step needs.
func tickLabel(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// barChart is the TTFT breakdown as horizontal stacked bars, one per band.
type barChart struct {
	ID            string
	Title         string
	Simulated     bool
	Width, Height float64
	PlotX, PlotW  float64
	LabelX        float64 // right edge of the bars' labels
	AxisY         float64
	Ticks         []tick
	Bars          []bar
	Legend        []legendRow
	LegendHeads   []string // the legend's value columns, one per bar
	Empty         string
}

type bar struct {
	Label, Sub          string
	Y, H                float64
	LabelY, SubY, TextY float64 // baselines of the label, its second line, and the text on the bar
	AboveY              float64 // baseline of the names written over the bar
	Total               string
	TotalX              float64
	Segments            []segment
}

type segment struct {
	X, W           float64
	Fill, TextFill string
	Hatch          string // the hatch pattern's url() for an estimated stage, else empty
	Label          string // drawn inside when it fits
	LabelX         float64
	// Above is the stage's name, drawn over the bar at AboveX (its middle)
	// when the segment is too narrow for Label but wide enough to point at.
	Above  string
	AboveX float64
	Title  string // the tooltip
}

type legendRow struct {
	Stage      string
	Fill       string
	Hatch      string
	Provenance string
	Values     []string // ms per bar
}

// bandBar is one bar to draw: a band of one run.
type bandBar struct {
	label string
	band  aggregate.Band
}

// breakdownChart draws the bands' stages; provenance gives each stage's
// provenances (a stage estimated for any request is hatched).
func breakdownChart(id, title string, simulated bool, bars []bandBar, provenance func(event.Stage) []event.Provenance) barChart {
	c := barChart{ID: id, Title: title, Simulated: simulated, Width: chartWidth, PlotX: labelColumn, PlotW: chartWidth - labelColumn - 90,
		LabelX: labelColumn - 10}
	var top float64
	var sets []iter.Seq[event.Stage]
	for _, b := range bars {
		top = max(top, b.band.TTFT)
		sets = append(sets, maps.Keys(b.band.Stages))
		c.LegendHeads = append(c.LegendHeads, b.label)
	}
	if top <= 0 || math.IsNaN(top) {
		c.Height, c.Empty = 90, "No TTFT breakdown: no server data was joined to the requests."
		return c
	}
	values, axisTop := niceTicks(top, 8)
	scale := c.PlotW / axisTop
	const barH, gap, titleH = 46.0, 22.0, 48.0
	y := titleH
	stages := event.OrderStages(event.BreakdownOrder(), sets...)
	for _, b := range bars {
		br := bar{Label: b.label, Sub: counted(b.band.Requests, "request", "requests"), Y: y, H: barH,
			LabelY: y + barH/2 - 3, SubY: y + barH/2 + 13, TextY: y + barH/2 + 4, AboveY: y - 4,
			Total: fmt.Sprintf("%.2f ms", b.band.TTFT)}
		x := c.PlotX
		for _, st := range stages {
			v := b.band.Stages[st]
			if v <= 0 || math.IsNaN(v) { // a negative unattributed residual cannot be stacked; the table shows it
				continue
			}
			est := estimated(provenance(st))
			sg := segment{X: x, W: v * scale, Fill: stageFill(st), TextFill: textOn(stageFill(st)),
				Title: fmt.Sprintf("%s: %.2f ms (%.1f%% of %.2f ms), %s", st, v, 100*v/b.band.TTFT, b.band.TTFT, provenanceText(provenance(st)))}
			if est {
				sg.Hatch = c.hatch(sg.Fill)
			}
			sg.Label, sg.LabelX = segmentLabel(string(st), v, est, sg.W), x+4
			if sg.Label == "" && sg.W >= 24 {
				sg.Above, sg.AboveX = string(st), x+sg.W/2
			}
			br.Segments = append(br.Segments, sg)
			x += sg.W
		}
		br.TotalX = x + 6
		c.Bars = append(c.Bars, br)
		y += barH + gap
	}
	c.AxisY = y - gap + 8
	for _, v := range values {
		c.Ticks = append(c.Ticks, tick{Pos: c.PlotX + v*scale, Label: tickLabel(v)})
	}
	c.Height = c.AxisY + 40
	for _, st := range stages {
		row := legendRow{Stage: string(st), Fill: stageFill(st), Provenance: provenanceText(provenance(st))}
		if estimated(provenance(st)) {
			row.Hatch = c.hatch(row.Fill)
		}
		for _, b := range bars {
			row.Values = append(row.Values, num(b.band.Stages[st], 2))
		}
		c.Legend = append(c.Legend, row)
	}
	return c
}

// hatch returns the pattern that marks an estimated segment of colour fill.
// Its stripes move away from the segment's text colour (light stripes under
// black text, dark ones under white), so a label over them keeps at least
// the contrast it has on the plain fill.
func (c *barChart) hatch(fill string) string {
	if textOn(fill) == "#000" {
		return "url(#" + c.ID + "-hatch-light)"
	}
	return "url(#" + c.ID + "-hatch-dark)"
}

func estimated(ps []event.Provenance) bool { return slices.Contains(ps, event.Estimated) }

// segmentLabel is the text inside a segment: the stage and its ms, or the
// stage alone, or nothing, whichever fits.
func segmentLabel(stage string, ms float64, est bool, width float64) string {
	if est {
		stage += " (est.)"
	}
	full := fmt.Sprintf("%s %.1f ms", stage, ms)
	fits := func(s string) bool { return float64(len(s))*charWidth+8 <= width }
	switch {
	case fits(full):
		return full
	case fits(stage):
		return stage
	}
	return ""
}

// lineChart is values over time.
type lineChart struct {
	ID                       string
	Title, YLabel, XLabel    string
	Simulated                bool
	Width, Height            float64
	Left, Right, Top, Bottom float64
	MidX, MidY               float64 // where the axis titles are centred
	XTicks, YTicks           []tick
	Lines                    []line
	Empty                    string
}

type line struct {
	Name         string
	EndLabel     string // the name without its parenthesis, written at the line's end
	Path         string
	Stroke, Dash string
	Width        float64
	EndX, EndY   float64 // where its name is written, right of its last point
	LegendX      float64
}

// lineSpec is one line to draw: a value of a series' points.
type lineSpec struct {
	name, stroke, dash string
	points             []Point
	value              func(Point) float64
}

func timeChart(id, title, yLabel string, simulated bool, specs []lineSpec) lineChart {
	return sizedTimeChart(300, id, title, yLabel, simulated, specs)
}

// sizedTimeChart is timeChart of the given height: every time chart has
// the same horizontal geometry, so charts of one run line up.
func sizedTimeChart(height float64, id, title, yLabel string, simulated bool, specs []lineSpec) lineChart {
	c := lineChart{ID: id, Title: title, YLabel: yLabel, XLabel: "seconds since the session started", Simulated: simulated,
		Width: chartWidth, Height: height, Left: 70, Right: chartWidth - 130, Top: 50, Bottom: height - 50}
	c.MidX, c.MidY = (c.Left+c.Right)/2, (c.Top+c.Bottom)/2
	var hiY, hiX float64
	seen := false
	for _, sp := range specs {
		for _, p := range sp.points {
			hiX = max(hiX, p.At.Seconds())
			if v := sp.value(p); !math.IsNaN(v) {
				hiY, seen = max(hiY, v), true
			}
		}
	}
	if !seen || hiX <= 0 {
		c.Height, c.Empty = 90, "No data for this chart in the recording."
		return c
	}
	yValues, yTop := niceTicks(hiY*1.05, 5)
	// The time axis ends where the session does, not at a round number.
	xValues, _ := niceTicks(hiX, 10)
	px := func(x float64) float64 { return c.Left + x/hiX*(c.Right-c.Left) }
	py := func(y float64) float64 { return c.Bottom - y/yTop*(c.Bottom-c.Top) }
	for _, v := range yValues {
		c.YTicks = append(c.YTicks, tick{Pos: py(v), Label: tickLabel(v)})
	}
	for _, v := range xValues {
		if v <= hiX {
			c.XTicks = append(c.XTicks, tick{Pos: px(v), Label: tickLabel(v)})
		}
	}
	legendX := c.Left
	for _, sp := range specs {
		short, _, _ := strings.Cut(sp.name, " (")
		ln := line{Name: sp.name, EndLabel: short, Stroke: sp.stroke, Dash: sp.dash, Width: 2, LegendX: legendX, EndY: math.NaN()}
		legendX += 40 + float64(len(sp.name))*charWidth + 24
		var b strings.Builder
		pen := false
		for _, p := range sp.points {
			v := sp.value(p)
			if math.IsNaN(v) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, px(p.At.Seconds()), py(v))
			pen = true
			ln.EndX, ln.EndY = px(p.At.Seconds())+6, py(v)+4
		}
		ln.Path = strings.TrimSpace(b.String())
		c.Lines = append(c.Lines, ln)
	}
	spreadEndLabels(c.Lines, 13)
	return c
}

// spreadEndLabels moves the names written at the lines' ends apart, so two
// lines ending close together stay readable.
func spreadEndLabels(lines []line, minGap float64) {
	idx := make([]int, 0, len(lines))
	for i := range lines {
		if !math.IsNaN(lines[i].EndY) {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return cmpFloat(lines[a].EndY, lines[b].EndY) })
	for k := 1; k < len(idx); k++ {
		prev, cur := &lines[idx[k-1]], &lines[idx[k]]
		if cur.EndY-prev.EndY < minGap {
			cur.EndY = prev.EndY + minGap
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
