package tui

import (
	"fmt"
	"maps"
	"math"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// The whole-request bar's two parts.
const (
	stageTTFT   event.Stage = "ttft"
	stageDecode             = event.StageDecode
)

// breakdown is one TTFT breakdown ready to draw: segments that add up to
// total, and what the title claims about them.
type breakdown struct {
	name     string  // source name (attach), else empty
	what     string  // "p99 band: slowest 1%, 25 requests"
	total    float64 // ms: the bar's length, the band's mean TTFT
	segs     []segment
	requests int64
	decode   float64 // ms, the band's mean E2E − TTFT
	tokens   float64
	client   bool // no server breakdown: client stages instead
}

// breakdownOf builds the bar for window w and statistic b. For pXX it is the
// band (the requests in that TTFT band, whose mean stages add up to their
// mean TTFT), never per-stage percentiles, which would not add up.
func breakdownOf(s *aggregate.Snapshot, w aggregate.Window, b aggregate.BandStat) breakdown {
	win := &s.Windows[w]
	band := win.Bands[b]
	if band.Requests == 0 {
		return clientBreakdown(s, w)
	}
	bd := breakdown{total: band.TTFT, requests: band.Requests, decode: band.Decode, tokens: band.Tokens}
	if s.Session != nil {
		bd.name = s.Session.Name
	}
	for _, st := range event.OrderStages(stageOrder, maps.Keys(band.Stages)) {
		seg := segment{stage: st, value: band.Stages[st], negative: win.Breakdown[st].Negative}
		// The window's main provenance decides the mark, not any single
		// request's (see aggregate.ProvenanceMix.Main).
		switch main := win.BreakdownProvenance[st].Main(); main {
		case "":
			seg.est = estimated(s.Breakdown.Stages[st].Provenance)
		case aggregate.Mixed:
			seg.mixed = true
		default:
			seg.est = main == event.Estimated
		}
		bd.segs = append(bd.segs, seg)
	}
	bd.what = bandWhat(b, band.Requests)
	return bd
}

func bandWhat(b aggregate.BandStat, n int64) string {
	switch b {
	case aggregate.BandP50:
		return fmt.Sprintf("p50 band: around the median (45–55%%), %d requests", n)
	case aggregate.BandP90:
		return fmt.Sprintf("p90 band: 85–95%%, %d requests", n)
	case aggregate.BandP99:
		return fmt.Sprintf("p99 band: slowest 1%%, %d requests", n)
	}
	return fmt.Sprintf("mean of %d requests", n)
}

// clientBreakdown is the fallback without server data: the client stages'
// mean contribution per request (a stage's total over the requests), which
// adds up to the mean TTFT when every request has every stage.
func clientBreakdown(s *aggregate.Snapshot, w aggregate.Window) breakdown {
	win := &s.Windows[w]
	bd := breakdown{client: true, requests: win.TTFT.Count}
	if s.Session != nil {
		bd.name = s.Session.Name
	}
	if win.TTFT.Count == 0 {
		return bd
	}
	n := float64(win.TTFT.Count)
	for _, st := range event.OrderStages(clientStageOrder, maps.Keys(win.Stages)) {
		x := win.Stages[st]
		v := x.Mean * float64(x.Count) / n
		bd.segs = append(bd.segs, segment{stage: st, value: v})
		bd.total += v
	}
	if win.E2E.Count > 0 {
		bd.decode = win.E2E.Mean - win.TTFT.Mean
		if _, ok := win.Stages[event.StageThinking]; ok && win.TTFTAnswer.Count > 0 {
			bd.decode = win.E2E.Mean - win.TTFTAnswer.Mean // the thinking is in the bar
		}
	}
	if win.OK > 0 {
		bd.tokens = float64(win.Tokens) / float64(win.OK)
	}
	bd.what = fmt.Sprintf("client stages, mean of %d requests (no server breakdown: bands need one)", win.TTFT.Count)
	return bd
}

// legendStyle is how much each legend entry says.
type legendStyle int

const (
	legendLong  legendStyle = iota // full names, shares to 0.1%, notes
	legendTight                    // short names, whole percents
)

// breakdownLines is the breakdown's height for legendRows legend rows and
// n sources: the same whatever the data, so nothing under it moves.
func breakdownLines(legendRows, sources int) int {
	n := 2 + legendRows + 2
	if sources > 0 {
		n += 1 + sources
	}
	return n
}

// renderBreakdown draws the TTFT bar with its legend on exactly legendRows
// lines, then the whole request (TTFT then decode), then one bar per
// source on a shared scale; always breakdownLines lines.
//
// hl, when set, is the stage picked on the legend: its segment stands out
// and the others fade. hits are where the legend's entries are drawn, with
// lines counted from the breakdown's first.
func renderBreakdown(st *styles, bd breakdown, sources []breakdown, legendRows int, window aggregate.Window, hl event.Stage, width int) (lines []string, hits []legendHit) {
	title := "TTFT breakdown · " + window.String()
	height := breakdownLines(legendRows, len(sources))
	if bd.requests == 0 {
		return pad([]string{
			rule(st, st.title.Render(title), width),
			fit(st.dim.Render(" waiting for the first finished request…"), width),
		}, height), nil
	}
	barW := max(width-4, 1)
	lines = []string{
		rule(st, st.title.Render(title)+" · "+bd.what+" · "+st.bold.Render(msUnit(bd.total)), width),
		" " + st.faint.Render("▕") + drawBar(st, barW, bd.total, bd.total, highlighted(bd.segs, hl)) + st.faint.Render("▏"),
	}
	leg, hits := legend(st, bd.segs, bd.total, legendRows, hl, width)
	for i := range hits {
		hits[i].line += len(lines)
	}
	lines = append(lines, leg...)
	lines = append(lines, wholeRequest(st, bd, width)...)
	lines = append(lines, sourceBars(st, sources, width)...)
	return pad(lines, height), hits
}

// legendHit is where a legend entry is drawn: a click there picks its stage.
type legendHit struct {
	line, from, to int // cells [from, to) of line
	stage          event.Stage
}

// highlighted marks every segment but hl's as faded (none when hl is "").
func highlighted(segs []segment, hl event.Stage) []segment {
	if hl == "" {
		return segs
	}
	out := make([]segment, len(segs))
	for i, s := range segs {
		s.faded = s.stage != hl
		out[i] = s
	}
	return out
}

// legend lists the segments in bar order with ms and share on exactly rows
// lines. When they do not fit it first shortens every entry, then leaves
// out the smallest shares, saying "+N more": no entry is ever cut. Mostly
// estimated stages carry "~", those of mixed provenance "~?", and a stage
// with negative values says on how many requests.
func legend(st *styles, segs []segment, total float64, rows int, hl event.Stage, width int) ([]string, []legendHit) {
	sh := shares(segs, total)
	for _, style := range []legendStyle{legendLong, legendTight} {
		hidden := make([]bool, len(segs))
		for n := 0; n <= len(segs); n++ {
			items, stages := legendItems(st, segs, sh, hidden, style, hl)
			lines, at := flowAt(items, "   ", "  ", width)
			if len(lines) <= rows {
				var hits []legendHit
				for i, a := range at {
					if stages[i] != "" {
						hits = append(hits, legendHit{line: a.line, from: a.from, to: a.to, stage: stages[i]})
					}
				}
				return pad(lines, rows), hits
			}
			if style == legendLong {
				break // shorten every entry before leaving any out
			}
			hideSmallest(sh, hidden)
		}
	}
	return pad(nil, rows), nil
}

// hideSmallest leaves out the smallest share still shown.
func hideSmallest(sh []int, hidden []bool) {
	low := -1
	for i := range sh {
		if !hidden[i] && (low < 0 || sh[i] < sh[low]) {
			low = i
		}
	}
	if low >= 0 {
		hidden[low] = true
	}
}

// legendItems are the legend's entries, with the stage each one shows ("" for
// the notes); hl's entry is drawn picked.
func legendItems(st *styles, segs []segment, sh []int, hidden []bool, style legendStyle, hl event.Stage) (items []string, stages []event.Stage) {
	items = make([]string, 0, len(segs)+3)
	anyEst, anyMixed, nHidden := false, false, 0
	for i, s := range segs {
		if hidden[i] {
			nHidden++
			continue
		}
		in := infoOf(s.stage)
		name := string(s.stage)
		if style == legendTight {
			name = in.short
		}
		switch {
		case s.est:
			name += "~"
			anyEst = true
		case s.mixed:
			name += "~?"
			anyMixed = true
		}
		swatch := string(in.letter)
		if !st.plain {
			swatch = st.stageStyle(s.stage).Render("█")
		}
		share := shareText(sh[i], style == legendTight)
		item := fmt.Sprintf("%s %s %s %s", swatch, name, ms(s.value), st.dim.Render(share))
		if s.negative > 0 && style == legendLong {
			item += st.dim.Render(fmt.Sprintf(" (%d negative)", s.negative))
		}
		if s.stage == hl {
			item = st.selected.Render("▸" + ansi.Strip(item))
		}
		items = append(items, item)
		stages = append(stages, s.stage)
	}
	note := func(text string) {
		items = append(items, st.dim.Render(text))
		stages = append(stages, "")
	}
	if nHidden > 0 {
		note(fmt.Sprintf("+%d more", nHidden))
	}
	if anyEst && style == legendLong {
		note("~ estimated")
	}
	if anyMixed && style == legendLong {
		note("~? mixed provenance")
	}
	return items, stages
}

// shareText writes a share in tenths of a percent as the legend prints
// it: "12.3%", or "12%" short.
func shareText(tenths int, short bool) string {
	if short {
		return fmt.Sprintf("%.0f%%", math.Round(float64(tenths)/10))
	}
	return fmt.Sprintf("%.1f%%", float64(tenths)/10)
}

// itemAt is where flowAt put an item: its line and cells [from, to).
type itemAt struct{ line, from, to int }

// flowAt lays items out over as many lines as they need, and says where
// each went.
func flowAt(items []string, sep, indent string, width int) ([]string, []itemAt) {
	var lines []string
	at := make([]itemAt, 0, len(items))
	line := indent
	for _, it := range items {
		add := it
		if line != indent {
			add = sep + it
		}
		if visibleWidth(line)+visibleWidth(add) > width && line != indent {
			lines = append(lines, fit(line, width))
			line, add = indent, it
		}
		from := visibleWidth(line) + visibleWidth(add) - visibleWidth(it)
		at = append(at, itemAt{line: len(lines), from: from, to: from + visibleWidth(it)})
		line += add
	}
	return append(lines, fit(line, width)), at
}

// wholeRequest draws TTFT then decode on one bar, with the numbers in the
// title: decode is E2E − TTFT, which runs from the first token to the last:
// one gap fewer than the tokens, so the figure that multiplies out is gaps
// × time per gap.
func wholeRequest(st *styles, bd breakdown, width int) []string {
	e2e := bd.total + bd.decode
	title := fmt.Sprintf("whole request · %s = TTFT %s + decode %s", st.bold.Render(msUnit(e2e)), msUnit(bd.total), msUnit(bd.decode))
	if bd.tokens > 1 {
		gaps := bd.tokens - 1
		perGap := msUnit(bd.decode / gaps)
		full := title + fmt.Sprintf(" (%.0f tokens: %.0f gaps × %s)", bd.tokens, gaps, perGap)
		title += fmt.Sprintf(" (%.0f gaps × %s)", gaps, perGap) // a narrow screen keeps the figure that multiplies out
		if visibleWidth(full)+3 <= width {
			title = full
		}
	}
	segs := []segment{{stage: stageTTFT, value: bd.total}, {stage: stageDecode, value: max(bd.decode, 0)}}
	barW := max(width-4, 1)
	return []string{
		rule(st, title, width),
		" " + st.faint.Render("▕") + drawBar(st, barW, e2e, e2e, segs) + st.faint.Render("▏"),
	}
}

// sourceBars draws one TTFT bar per attached source, all to the scale of
// the slowest, labelled by name.
func sourceBars(st *styles, sources []breakdown, width int) []string {
	if len(sources) == 0 {
		return nil
	}
	var scale float64
	for _, s := range sources {
		scale = max(scale, s.total)
	}
	const nameW, numW = 12, 10
	barW := max(width-nameW-numW-4, 1)
	lines := []string{rule(st, "per source · shared scale", width)}
	for _, s := range sources {
		lines = append(lines, " "+fit(s.name, nameW)+st.faint.Render("▕")+drawBar(st, barW, s.total, scale, s.segs)+
			st.faint.Render("▏")+fit(" "+msUnit(s.total), numW))
	}
	return lines
}
