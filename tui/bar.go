package tui

import (
	"math"
	"strings"

	"github.com/latscope/latscope/event"
)

// segment is one stage's part of a stacked bar.
type segment struct {
	stage event.Stage
	value float64 // ms
	est   bool    // mostly estimated: drawn shaded, marked "~" in the legend
	mixed bool    // no provenance covers most of its values: marked "~?"
	// negative counts the requests whose value was below zero (a
	// residual): the legend says how many.
	negative int64
	// faded is set when another stage is picked: drawn as dots.
	faded bool
}

// split divides the cells a bar of width cells fills, for a total of
// total ms drawn to a scale of scale ms across the width, among the
// segments in proportion to their values, in whole cells by largest
// remainder: the cells always add up to the filled length, so the drawn
// segments add up to what the bar claims. Negative values (a residual a
// little below zero) get no cells.
func split(width int, total, scale float64, segs []segment) (filled int, cells []int) {
	cells = make([]int, len(segs))
	if width <= 0 || scale <= 0 || total <= 0 {
		return 0, cells
	}
	filled = min(width, int(math.Round(float64(width)*total/scale)))
	var pos float64
	for _, s := range segs {
		pos += math.Max(s.value, 0)
	}
	if pos <= 0 {
		return 0, cells
	}
	rem := make([]float64, len(segs))
	used := 0
	for i, s := range segs {
		exact := float64(filled) * math.Max(s.value, 0) / pos
		cells[i] = int(exact)
		rem[i] = exact - float64(cells[i])
		used += cells[i]
	}
	for ; used < filled; used++ {
		best := -1
		for i := range rem {
			if best < 0 || rem[i] > rem[best] {
				best = i
			}
		}
		cells[best]++
		rem[best] = -1
	}
	return filled, cells
}

// drawBar renders a one-line stacked bar of width cells: each segment in
// its stage's colour, shaded when estimated, or, without colour, as its
// stage's letter so segments stay told apart.
func drawBar(st *styles, width int, total, scale float64, segs []segment) string {
	filled, cells := split(width, total, scale, segs)
	var b strings.Builder
	for i, s := range segs {
		n := cells[i]
		if n == 0 {
			continue
		}
		if s.faded {
			b.WriteString(st.faint.Render(strings.Repeat("·", n)))
			continue
		}
		if st.plain {
			b.WriteString(strings.Repeat(string(infoOf(s.stage).letter), n))
			continue
		}
		glyph := "█"
		if s.est {
			glyph = "▓"
		}
		b.WriteString(st.stageStyle(s.stage).Render(strings.Repeat(glyph, n)))
	}
	b.WriteString(strings.Repeat(" ", width-filled))
	return b.String()
}

// shares returns each segment's share of total (the TTFT the bar claims)
// in tenths of a percent: the quantity the summary and reports call a
// stage's share (its total over the TTFT total), signed, so a negative
// residual shows as one. Rounded by largest remainder, so shares of
// segments that add up to total add up to exactly 100.0%.
func shares(segs []segment, total float64) []int {
	out := make([]int, len(segs))
	if total <= 0 {
		return out
	}
	rem := make([]float64, len(segs))
	used, sum := 0, 0.0
	for i, s := range segs {
		exact := 1000 * s.value / total
		out[i] = int(math.Floor(exact))
		rem[i] = exact - float64(out[i])
		used += out[i]
		sum += exact
	}
	for want := min(int(math.Round(sum)), used+len(segs)); used < want; used++ {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		out[best]++
		rem[best] = -1
	}
	return out
}
