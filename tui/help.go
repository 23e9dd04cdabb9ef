package tui

import (
	"fmt"
	"strings"

	"github.com/latscope/latscope/event"
)

// renderHelp is the help page: the keys, then how to read the screen.
func (m *model) renderHelp() []string {
	st, w := m.st, m.width
	lines := []string{rule(st, st.title.Render("help")+st.dim.Render("   ? or esc to close"), w), ""}
	for _, l := range strings.Split(m.help.FullHelpView(m.keys.FullHelp()), "\n") {
		lines = append(lines, fit("  "+l, w))
	}
	lines = append(lines, "")
	// The status line shows what fits; here is all of it.
	if m.hasFrame {
		warns := warnings(&m.frame.Snapshot, m.frame.Status)
		for _, w := range warns {
			for i, l := range wrap("⚠ "+w, max(w0(m.width)-2, 20)) {
				if i > 0 {
					l = "  " + l
				}
				lines = append(lines, fit("  "+st.bad.Render(l), m.width))
			}
		}
		for _, n := range m.frame.Notices {
			for _, l := range wrap(n, max(w0(m.width), 20)) {
				lines = append(lines, fit("  "+st.dim.Render(l), m.width))
			}
		}
		if len(warns)+len(m.frame.Notices) > 0 {
			lines = append(lines, "")
		}
	}
	for _, p := range helpText {
		for _, l := range wrap(p, max(w-4, 20)) {
			lines = append(lines, fit("  "+l, w))
		}
	}
	lines = append(lines, "")
	for _, l := range wrap(letterKey(), max(w-4, 20)) {
		lines = append(lines, fit("  "+st.dim.Render(l), w))
	}
	for _, p := range glossary() {
		for _, l := range wrap(p, max(w-4, 20)) {
			lines = append(lines, fit("  "+st.dim.Render(l), w))
		}
	}
	return lines
}

// letterKey says what every letter the bars draw without colour stands
// for: every stage of the table (the server's own stages and other
// included), then the whole-request bar's two.
func letterKey() string {
	var letters []string
	for _, m := range event.StageTable() {
		letters = append(letters, fmt.Sprintf("%c %s", m.Letter, m.Stage))
	}
	for _, s := range []event.Stage{stageTTFT, stageDecode} {
		in := infoOf(s)
		letters = append(letters, fmt.Sprintf("%c %s", in.letter, in.short))
	}
	return "Bar letters without colour: " + strings.Join(letters, ", ") + " (the whole-request bar)."
}

// glossary defines every word of the summary and every stage the
// legend, the table and the letter key name (event.StageTable's meanings,
// with the legend's short labels), as docs/glossary.md does: two
// paragraphs, so a help page that does not scroll holds them.
func glossary() []string {
	words := make([]string, len(summaryWords))
	for i, w := range summaryWords {
		words[i] = w.word + ": " + w.meaning
	}
	var stages []string
	for _, m := range event.StageTable() {
		name := string(m.Stage)
		if m.Short != name {
			name += " (" + m.Short + ")"
		}
		stages = append(stages, name+": "+m.Meaning)
	}
	return []string{"Words. " + strings.Join(words, "; ") + ".", "Stages. " + strings.Join(stages, "; ") + "."}
}

// summaryWords define the words of the summary, the table and the charts.
var summaryWords = []struct{ word, meaning string }{
	{"ttft", "time to first token, from the intended send time to the first content chunk (reasoning or answer)"},
	{"ttft_answer", "a reasoning model's time to its first answer token"},
	{"thinking", "a reasoning model's first token → its first answer token"},
	{"ttst", "time to second token, from the intended send time to the second output token"},
	{"itl", "inter-token latency: the gap between two reads that brought content"},
	{"tpot", "time per output token after the first: (e2e − ttft) / (output tokens − 1)"},
	{"e2e", "end to end, from the intended send time to the end of the stream"},
	{"sched_lag", "how late the probe sent a request against its schedule (open loop)"},
	{"tok/s per request", "one request's output tokens per second"},
	{"share", "a stage's part of the summed TTFT of the requests with a breakdown"},
	{"band", "the mean breakdown of the requests around a percentile of TTFT (p99: the slowest 1%), whose stages add up to their TTFT"},
	{"provenance", "measured (latscope's clock), server (reported by the server), estimated (derived by latscope); ~ marks estimated, ~? mixed"},
}
var helpText = []string{
	"The header says what is measured and whether every source is healthy: the probe (latscope itself), the metrics scrape, the OTLP join and NVML. A red line under it names whatever is in trouble, with the figure.",
	"The bar splits the time to first token by stage, in the order a request crosses them. For p50/p90/p99 it is the band of requests around that percentile (p99: the slowest 1%), so its stages add up to the band's TTFT; ~ marks stages estimated for most requests of the window, ~? those of mixed provenance; server wait is the server's front end and queue, not told apart. Below it, the whole request: TTFT, then decode.",
	"The mouse: the wheel scrolls the requests, a click selects one and a second click opens its waterfall; a click on a legend entry picks that stage on the bar and in the table (click it again to let go). In the requests view, / filters: ok or failed, an outcome or flag (429, nagle), ttft>200 for a minimum TTFT in ms, @name for one agent; enter applies, esc clears.",
	"The table gives each stage's statistics over the window (w), with where its numbers came from. The charts show the 10 s percentiles second by second. Markers list stalls, gaps, insights, error bursts and SLO breaches, newest first.",
}

// w0 is the text width inside the help page's margins.
func w0(width int) int { return width - 4 }
