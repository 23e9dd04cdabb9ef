package tui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Marker kinds the screen adds itself.
const (
	markerSLO    event.MarkerKind = "slo"
	markerErrors event.MarkerKind = "errors"
)

// Detector thresholds: an error burst is at least burstMin errors or
// burstShare of the requests in one burstPeriod.
const (
	burstPeriod = 10 * time.Second
	burstMin    = 3
	burstShare  = 0.05
	keepMarkers = 50
)

// markerLog is a ring of the markers the screen made.
type markerLog struct {
	items []event.Marker
	next  int
}

func (l *markerLog) add(m event.Marker) {
	if len(l.items) < keepMarkers {
		l.items = append(l.items, m)
		return
	}
	l.items[l.next] = m
	l.next = (l.next + 1) % keepMarkers
}

// watcher turns the snapshots into the screen's own markers: SLO breaches
// that last a whole window, error bursts and Nagle suspects.
type watcher struct {
	objectives  []aggregate.Objective
	breachSince []time.Time // zero while the objective holds
	reported    []bool

	period     int64 // burstPeriod epoch of the counters below
	sent       int64
	byOutcome  map[event.Outcome]int64
	byStatus   map[int]int64
	nagle      int64
	seenPeriod bool

	log markerLog
}

func newWatcher(objectives []aggregate.Objective) *watcher {
	return &watcher{
		objectives:  objectives,
		breachSince: make([]time.Time, len(objectives)),
		reported:    make([]bool, len(objectives)),
	}
}

func (w *watcher) observe(s *aggregate.Snapshot) {
	if s.Now.IsZero() {
		return
	}
	w.checkSLOs(s)
	w.checkBursts(s)
}

// checkSLOs adds a marker when an objective has been broken, on the 10 s
// window, for a whole window.
func (w *watcher) checkSLOs(s *aggregate.Snapshot) {
	win := &s.Windows[aggregate.Win10s]
	for i, o := range w.objectives {
		got, ok := sloValue(o, win)
		if !ok || sloPass(o, got) {
			w.breachSince[i], w.reported[i] = time.Time{}, false
			continue
		}
		if w.breachSince[i].IsZero() {
			w.breachSince[i] = s.Now
		}
		if !w.reported[i] && s.Now.Sub(w.breachSince[i]) >= 10*time.Second {
			w.reported[i] = true
			w.log.add(event.Marker{
				Time: s.Now, Kind: markerSLO, Source: "tui",
				Message: fmt.Sprintf("SLO %s broken for a whole 10 s window (now %s)", o, sloText(o, got)),
			})
		}
	}
}

// checkBursts compares the run's error and flag counters once per period.
func (w *watcher) checkBursts(s *aggregate.Snapshot) {
	r := &s.Requests
	e := s.Now.UnixNano() / int64(burstPeriod)
	if w.seenPeriod && e == w.period {
		return
	}
	if w.seenPeriod {
		sent := r.Sent - w.sent
		errs := diffKinds(r.ByOutcome, w.byOutcome, r.ByStatus, w.byStatus)
		var n int64
		for _, k := range errs {
			n += k.n
		}
		if n >= burstMin || sent > 0 && float64(n) >= burstShare*float64(sent) && n > 0 {
			w.log.add(event.Marker{
				Time: s.Now, Kind: markerErrors, Source: "tui",
				Message: fmt.Sprintf("error burst: %s in %s (%s of %d requests)",
					joinKinds(errs, 4), burstPeriod, pct(float64(n)/math.Max(float64(sent), 1)), sent),
			})
		}
		if nagle := r.Flags[event.FlagNagleSuspect] - w.nagle; nagle > 0 {
			w.log.add(event.Marker{
				Time: s.Now, Kind: event.MarkerGap, Source: "tui",
				Message: fmt.Sprintf("Nagle suspect: %d requests with inter-token gaps near 40 ms (delayed-ACK coalescing) in %s", nagle, burstPeriod),
			})
		}
	}
	w.seenPeriod, w.period, w.sent = true, e, r.Sent
	w.byOutcome = copyCounts(r.ByOutcome)
	w.byStatus = copyCounts(r.ByStatus)
	w.nagle = r.Flags[event.FlagNagleSuspect]
}

func copyCounts[K comparable](m map[K]int64) map[K]int64 {
	out := make(map[K]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// errKind is one kind of error with its count: "429" or "stream_reset".
type errKind struct {
	name string
	n    int64
}

// errorKinds lists the errors by kind, an HTTP status standing for its
// http_status outcome, most frequent first.
func errorKinds(byOutcome map[event.Outcome]int64, byStatus map[int]int64) []errKind {
	return diffKinds(byOutcome, nil, byStatus, nil)
}

func diffKinds(o, o0 map[event.Outcome]int64, st, st0 map[int]int64) []errKind {
	var out []errKind
	var statusN int64
	for code, n := range st {
		if d := n - st0[code]; d > 0 {
			out = append(out, errKind{fmt.Sprint(code), d})
			statusN += d
		}
	}
	for k, n := range o {
		d := n - o0[k]
		if k == event.OutcomeHTTPStatus {
			d -= statusN // those with a status are already listed by it
		}
		if d > 0 {
			out = append(out, errKind{string(k), d})
		}
	}
	slices.SortFunc(out, func(a, b errKind) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.name, b.name)) })
	return out
}

// joinKinds writes "429 ×3, stream_reset ×1", at most max kinds.
func joinKinds(ks []errKind, max int) string {
	var b strings.Builder
	for i, k := range ks {
		if i == max {
			fmt.Fprintf(&b, ", +%d more", len(ks)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s ×%d", k.name, k.n)
	}
	return b.String()
}

// sloValue returns the objective's metric over window w (ms for latencies,
// a fraction for the error rate), and false without data or for a metric
// only the whole run can judge (requests.ok).
func sloValue(o aggregate.Objective, w *aggregate.WindowStats) (float64, bool) {
	if o.Metric == "errors.rate" {
		if w.Sent == 0 {
			return 0, false
		}
		return float64(w.Errors) / float64(w.Sent), true
	}
	family, stat, _ := strings.Cut(o.Metric, ".")
	st, ok := metricStats(w, family)
	if !ok || st.Count == 0 {
		return 0, false
	}
	return statOf(st, stat)
}

func metricStats(w *aggregate.WindowStats, family string) (aggregate.Stats, bool) {
	switch family {
	case "ttft":
		return w.TTFT, true
	case "itl":
		return w.ITL, true
	case "tpot":
		return w.TPOT, true
	case "e2e":
		return w.E2E, true
	}
	return aggregate.Stats{}, false
}

func statOf(st aggregate.Stats, stat string) (float64, bool) {
	switch stat {
	case "mean":
		return st.Mean, true
	case "p50":
		return st.P50, true
	case "p90":
		return st.P90, true
	case "p99":
		return st.P99, true
	case "max":
		return st.Max, true
	}
	return 0, false
}

func sloPass(o aggregate.Objective, got float64) bool {
	switch o.Op {
	case "<":
		return got < o.Value
	case "<=":
		return got <= o.Value
	case ">":
		return got > o.Value
	case ">=":
		return got >= o.Value
	}
	return true
}

func sloText(o aggregate.Objective, got float64) string {
	if o.Metric == "errors.rate" {
		return pct(got)
	}
	return msUnit(got)
}

// breaches reports, for the stage table, which objectives fail over window
// w: keyed "ttft.p99" and so on.
func breaches(objectives []aggregate.Objective, w *aggregate.WindowStats) map[string]bool {
	out := make(map[string]bool)
	for _, o := range objectives {
		if got, ok := sloValue(o, w); ok && !sloPass(o, got) {
			out[o.Metric] = true
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

// markerRows lists the snapshot's recent markers and the screen's own,
// newest first, each run of stalls of one cause folded into one row; the
// aggregator's current insights come first of all.
func markerRows(s *aggregate.Snapshot, own *markerLog) []markerRow {
	begin := s.Now.Add(-s.Elapsed)
	all := make([]event.Marker, 0, len(s.Markers.Recent)+len(own.items))
	all = append(all, s.Markers.Recent...)
	all = append(all, own.items...)
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
		if i := strings.LastIndexByte(s[:cut], ' '); i > width/3 {
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
