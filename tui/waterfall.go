package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Waterfall geometry: a label column, the time axis, a value column as
// wide as the widest value up to wfValueMax, and the axis never narrower
// than wfAxisMin. A provenance longer than its column wraps under itself.
const (
	wfLabelW   = 15
	wfValueMin = 24
	wfValueMax = 48
	wfAxisMin  = 30
)

// renderWaterfall draws one request on a shared time axis from its
// intended send: every client stage, then the breakdown's server-side
// stages, each with its provenance; the first token; then every token
// arrival as a tick along the decode, with the numbers. sum holds the
// decode numbers the request sample published for r (taken from all its
// chunks, where r's were thinned); nil for a request drawn without one.
func renderWaterfall(st *styles, r *event.Request, sum *aggregate.DecodeSummary, width, height int) []string {
	total := durMS(max(r.E2E, r.TTFT, stagesEnd(r.Stages), stagesEnd(r.Breakdown)))
	valueW := wfValueMin
	for _, s := range slices.Concat(r.Stages, r.Breakdown) {
		num, prov := stageValue(s)
		valueW = max(valueW, len(num)+1+visibleWidth(prov))
	}
	valueW = min(valueW, wfValueMax, max(width-wfLabelW-wfAxisMin-2, wfValueMin))
	axisW := max(width-wfLabelW-valueW-2, 10)
	scale := float64(axisW) / math.Max(total, 1e-3)

	lines := []string{rule(st, waterfallTitle(st, r), width), fit(axisLine(total, axisW), width)}
	row := func(label, bar, value string) {
		lines = append(lines, fit(" "+fit(label, wfLabelW-1)+bar+" "+value, width))
	}
	// stageRow draws a stage; its provenance wraps under itself, at word
	// boundaries, rather than lose its end (it is the waterfall's point).
	stageRow := func(s event.StageTiming, at time.Duration) {
		num, prov := stageValue(s)
		parts := wrap(prov, max(valueW-len(num)-1, 8))
		row(string(s.Stage), span(st, s.Stage, at, s.Duration, scale, axisW), num+" "+st.dim.Render(parts[0]))
		for _, p := range parts[1:] {
			row("", strings.Repeat(" ", axisW), strings.Repeat(" ", len(num)+1)+st.dim.Render(p))
		}
	}
	var at time.Duration
	for _, s := range r.Stages {
		stageRow(s, at)
		at += s.Duration
	}
	at = 0
	for _, s := range r.Breakdown {
		if !slices.Contains(clientStageOrder, s.Stage) {
			stageRow(s, at)
		}
		at += s.Duration
	}
	if r.TTFT > 0 {
		pos := min(int(durMS(r.TTFT)*scale), axisW-1)
		row("first token", strings.Repeat(" ", pos)+st.accent.Render("◆")+strings.Repeat(" ", axisW-pos-1), msUnit(durMS(r.TTFT)))
	}
	if r.HasFlag(event.FlagServerReported) {
		note := serverSpanRows(st, r, scale, axisW, row) // draws its rows first
		lines = append(lines, fit(note, width))
	}
	if len(r.Chunks) > 0 {
		var d aggregate.DecodeSummary
		if sum != nil {
			d = *sum
		} else {
			d = aggregate.DecodeOf(r)
		}
		row("tokens", ticks(st, r, d.P50, scale, axisW), fmt.Sprintf("%d in %d chunks", r.OutputTokens, d.Chunks))
		lines = append(lines, fit("   "+decodeNumbers(r, d), width))
	}
	switch {
	case r.Failed():
		lines = append(lines, fit("   "+st.bad.Render("failed: "+failure(r)), width))
	case !r.OK():
		lines = append(lines, fit("   "+st.dim.Render("cancelled at the end of the run, not failed"), width))
	}
	if len(r.Flags) > 0 {
		fl := make([]string, len(r.Flags))
		for i, f := range r.Flags {
			fl[i] = string(f)
		}
		lines = append(lines, fit("   "+st.warn.Render("flags: "+strings.Join(fl, ", ")), width))
	}
	if len(lines) > height {
		lines = lines[:height]
	}
	return lines
}

// serverSpanRows draws what a user's record (the server's span) holds
// beyond its TTFT breakdown: its decode after the first token or, without
// a TTFT (TGI's spans), its stages end to end; and says that the client
// saw none of it.
func serverSpanRows(st *styles, r *event.Request, scale float64, axisW int, row func(label, bar, value string)) string {
	if r.Server != nil {
		prov := st.dim.Render("server (" + r.Server.Source + " span)")
		if r.TTFT > 0 {
			if d, ok := r.Server.Stages[event.StageDecode]; ok {
				row(string(event.StageDecode), span(st, stageDecode, r.TTFT, d, scale, axisW), msUnit(durMS(d))+" "+prov)
			}
		} else {
			var at time.Duration
			for _, stage := range []event.Stage{event.StageTokenize, event.StageQueue, event.StagePrefill, event.StageDecode, event.StageInference} {
				if d, ok := r.Server.Stages[stage]; ok && d >= 0 {
					row(string(stage), span(st, stage, at, d, scale, axisW), msUnit(durMS(d))+" "+prov)
					at += d
				}
			}
		}
	}
	return "   " + st.dim.Render("one of the server's users' requests, from its span: every time the server's, none measured by latscope")
}

func waterfallTitle(st *styles, r *event.Request) string {
	parts := []string{st.title.Render("request " + r.ID)}
	if r.E2E > 0 {
		parts = append(parts, "e2e "+msUnit(durMS(r.E2E)))
	}
	parts = append(parts, fmt.Sprintf("%d tokens", r.OutputTokens), string(r.Outcome))
	if r.Server != nil && r.Server.Source != "" {
		parts = append(parts, "server timing: "+r.Server.Source)
	}
	if r.ReusedConn {
		parts = append(parts, "reused connection")
	}
	return strings.Join(parts, " · ") + st.dim.Render("   esc back")
}

func stagesEnd(ss []event.StageTiming) time.Duration {
	var d time.Duration
	for _, s := range ss {
		d += max(s.Duration, 0)
	}
	return d
}

// axisLine labels the time axis at about every 12 cells.
func axisLine(total float64, w int) string {
	b := []byte(strings.Repeat(" ", w))
	n := max(w/12, 1)
	for i := 0; i <= n; i++ {
		pos := i * (w - 1) / n
		label := ms(total * float64(pos) / float64(w-1))
		if i == 0 {
			label = "0 ms"
		}
		start := min(pos, w-len(label))
		if i > 0 && start > 0 && b[start-1] != ' ' {
			continue
		}
		copy(b[start:], label)
	}
	return strings.Repeat(" ", wfLabelW) + string(b)
}

// span draws [at, at+d) on the axis: at least one cell, so a stage too
// short to see still shows where it happened.
func span(st *styles, stage event.Stage, at, d time.Duration, scale float64, w int) string {
	from := min(int(durMS(at)*scale), w-1)
	to := min(max(int(math.Ceil(durMS(at+max(d, 0))*scale)), from+1), w)
	glyph := "█"
	if st.plain {
		glyph = string(infoOf(stage).letter)
	}
	return strings.Repeat(" ", from) + st.stageStyle(stage).Render(strings.Repeat(glyph, to-from)) + strings.Repeat(" ", w-to)
}

// stageValue is a stage's duration and where it came from.
func stageValue(s event.StageTiming) (num, prov string) {
	prov = string(s.Provenance)
	if s.Source != "" {
		prov += " (" + s.Source + ")"
	}
	return msUnit(durMS(s.Duration)), prov
}

// ticks marks every cell a chunk arrived in along the decode; a gap of more
// than three median inter-token gaps shows as a red stretch.
func ticks(st *styles, r *event.Request, p50 time.Duration, scale float64, w int) string {
	cells := make([]byte, w)
	for i := range cells {
		cells[i] = ' '
	}
	lag := r.SchedLag
	for i, c := range r.Chunks {
		pos := min(int(durMS(lag+c.At)*scale), w-1)
		if i > 0 && p50 > 0 && c.At-r.Chunks[i-1].At > 3*p50 {
			for j := min(int(durMS(lag+r.Chunks[i-1].At)*scale), w-1) + 1; j < pos; j++ {
				cells[j] = '!'
			}
		}
		cells[pos] = '|'
	}
	var b strings.Builder
	for i := 0; i < w; {
		j := i
		for j < w && cells[j] == cells[i] {
			j++
		}
		run := string(cells[i:j])
		switch cells[i] {
		case '|':
			b.WriteString(st.tokens.Render(run))
		case '!':
			if st.plain {
				b.WriteString(run)
			} else {
				b.WriteString(st.bad.Render(strings.Repeat("━", j-i)))
			}
		default:
			b.WriteString(run)
		}
		i = j
	}
	return b.String()
}

// decodeNumbers sums up the decode: ITL median and worst, and the time per
// output token.
func decodeNumbers(r *event.Request, d aggregate.DecodeSummary) string {
	if d.Chunks < 2 {
		return fmt.Sprintf("%d tokens", r.OutputTokens)
	}
	s := fmt.Sprintf("ITL p50 %s, max %s (before chunk %d at %s)", msUnit(durMS(d.P50)), msUnit(durMS(d.Worst)), d.WorstAt+1,
		msUnit(durMS(r.SchedLag+d.WorstEnd)))
	if tpot := r.TPOT(); tpot > 0 {
		s += ", TPOT " + msUnit(durMS(tpot))
	}
	return s
}
