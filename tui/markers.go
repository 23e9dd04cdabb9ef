package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// The kinds of the markers the aggregator derives (SLO breaches, error
// bursts), styled by styles.go; the screen derives none itself.
const (
	markerSLO    = aggregate.MarkerSLOBreach
	markerErrors = aggregate.MarkerErrorBurst
)

// errKind is one kind of error with its count, as aggregate lists them.
type errKind = aggregate.ErrorKind

// errorKinds lists the errors by kind, most frequent first (aggregate's
// grouping: an HTTP status stands for its http_status outcome).
func errorKinds(byOutcome map[event.Outcome]int64, byStatus map[int]int64) []errKind {
	return aggregate.ErrorKinds(byOutcome, byStatus)
}

// joinKinds writes "429 ×3, stream_reset ×1", at most max kinds.
func joinKinds(ks []errKind, max int) string { return aggregate.JoinErrorKinds(ks, max) }

// objectivesOf returns the objectives the screen draws and marks: those it
// was given, else those the aggregator judges (a replayed or attached
// session's own), so the table agrees with the breach markers.
func (m *model) objectivesOf(s *aggregate.Snapshot) []aggregate.Objective {
	if len(m.objectives) > 0 {
		return m.objectives
	}
	return s.Objectives
}

// breaches reports, for the stage table, which objectives aggregate judges
// broken over window w: keyed "ttft.p99" and so on.
func breaches(objectives []aggregate.Objective, w *aggregate.WindowStats) map[string]bool {
	out := make(map[string]bool)
	for _, r := range aggregate.EvaluateWindow(w, objectives) {
		if r.Broken() {
			out[r.Metric] = true
		}
	}
	return out
}

// markerRow is one marker as the panel lists it, or a run of stall
// markers of one cause folded into their newest.
type markerRow struct {
	at    time.Duration // since the session started
	kind  event.MarkerKind
	cause event.StallCause
	text  string
	// count is how many markers the row stands for (1 unless folded);
	// oldest is then the time of the oldest of them.
	count  int
	oldest time.Duration
}

// markerRows lists the snapshot's recent markers (the sources' and those
// the aggregator derived), newest first, each run of stalls of one cause
// folded into one row; the aggregator's current insights come first of all.
func markerRows(s *aggregate.Snapshot) []markerRow {
	begin := s.Now.Add(-s.Elapsed)
	all := make([]event.Marker, 0, len(s.Markers.Recent))
	all = append(all, s.Markers.Recent...)
	// Newest first, markers of one time in the order they came; then
	// reversed into the time order FoldStalls takes, and listed backwards.
	slices.SortStableFunc(all, func(a, b event.Marker) int { return b.Time.Compare(a.Time) })
	slices.Reverse(all)
	runs := aggregate.FoldStalls(all)
	rows := make([]markerRow, 0, len(s.Insights)+len(runs))
	for _, m := range s.Insights {
		rows = append(rows, markerRow{at: -1, kind: m.Kind, text: m.Message, count: 1, oldest: -1})
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		rows = append(rows, markerRow{at: r.Time.Sub(begin), kind: r.Kind, cause: r.Cause, text: r.Message, count: r.Count, oldest: r.First.Sub(begin)})
	}
	return rows
}

// renderMarkers draws the markers panel body: newest first, each with its
// time and kind, the text wrapped under it.
func renderMarkers(st *styles, rows []markerRow, width, height int) []string {
	out := make([]string, 0, height)
	textW := max(width-18, 10) // under the 18 cells of time and kind
	for _, r := range rows {
		if len(out) >= height {
			break
		}
		at := "  now  "
		if r.at >= 0 {
			at = clock(r.at)
		}
		kind := st.markerStyle(r.kind).Render(fmt.Sprintf("%-8s", shortKind(r.kind)))
		text := r.text
		if r.count > 1 {
			text = fmt.Sprintf("×%d since %s · %s", r.count, clockShort(r.oldest), text)
		}
		lines := wrap(text, textW)
		for i, l := range lines {
			if len(out) >= height {
				break
			}
			if i == 0 {
				out = append(out, " "+st.dim.Render(at)+" "+kind+" "+l)
			} else {
				out = append(out, strings.Repeat(" ", 18)+l)
			}
		}
	}
	if len(rows) == 0 && height > 0 {
		out = append(out, st.dim.Render(" nothing yet: stalls, gaps, insights, error bursts and SLO breaches show here"))
	}
	return out
}

func shortKind(k event.MarkerKind) string {
	switch k {
	case event.MarkerProbeLimit:
		return "probe"
	case event.MarkerCollector:
		return "source"
	}
	return string(k)
}

// wrap breaks s into lines of at most width cells at spaces.
func wrap(s string, width int) []string {
	var lines []string
	for len(s) > 0 {
		if len([]rune(s)) <= width {
			lines = append(lines, s)
			break
		}
		cut := byteIndexOfRune(s, width)
		if i := strings.LastIndexByte(s[:cut], ' '); i > 0 { // never cut a word that fits a line
			cut = i
		}
		lines = append(lines, strings.TrimRight(s[:cut], " "))
		s = strings.TrimLeft(s[cut:], " ")
	}
	return lines
}

func byteIndexOfRune(s string, n int) int {
	i := 0
	for j := range s {
		if i == n {
			return j
		}
		i++
	}
	return len(s)
}
