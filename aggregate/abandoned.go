package aggregate

import (
	"fmt"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/latscope/latscope/event"
)

// Abandoned requests (--cancel-after): the probe closed their streams on
// purpose, as users who pressed stop. They are neither errors nor
// cancelled by the run, and their latencies stay out of every statistic;
// what is kept of them is how many there were, by rule, and how long the
// server took to let each one's batch slot go once its stream closed.

// Abandoned is the run's abandoned requests.
type Abandoned struct {
	Count int64            `json:"count"`
	Rules map[string]int64 `json:"rules"` // by --cancel-after rule
	// Release is the stream's close → the server's running gauge showing
	// the slot free (ms), over the requests it was measured for.
	Release Stats `json:"release"`
	// ReleaseSources names the gauges watched.
	ReleaseSources []string `json:"release_sources,omitempty"`
	// Unmeasured counts the abandoned requests without a release time, by
	// the reason given.
	Unmeasured map[string]int64 `json:"unmeasured,omitempty"`
}

// abandonState tallies the abandoned requests.
type abandonState struct {
	n          int64
	rules      map[string]int64
	release    tally
	h          *hdr.Histogram
	sources    map[string]bool
	unmeasured map[string]int64
}

func (s *abandonState) add(r *event.Request) {
	s.n++
	a := r.Abandon
	if a == nil {
		a = &event.Abandon{Rule: "?"}
	}
	if s.rules == nil {
		s.rules, s.sources, s.unmeasured = map[string]int64{}, map[string]bool{}, map[string]int64{}
	}
	bump(s.rules, a.Rule, "other")
	if a.Release <= 0 && a.ReleaseSource == "" {
		note := a.ReleaseNote
		if note == "" {
			note = "not watched"
		}
		bump(s.unmeasured, note, "other")
		return
	}
	if len(s.sources) < maxCountKeys {
		s.sources[a.ReleaseSource] = true
	}
	us, _ := clamp(int64(a.Release / time.Microsecond))
	if s.h == nil {
		s.h = hdr.New(histLowest, histHighest, 3)
	}
	s.release.add(max(us, 1))
	_ = s.h.RecordValue(max(us, 1))
}

func (s *abandonState) summary() *Abandoned {
	if s.n == 0 {
		return nil
	}
	out := &Abandoned{Count: s.n, Rules: copyMap(s.rules)}
	if s.release.n > 0 {
		out.Release = finishStats(s.release, s.h.ValueAtPercentilesSlice(statsPercentiles[:]))
	}
	out.ReleaseSources = append(out.ReleaseSources, sortedKeys(s.sources)...)
	if len(s.unmeasured) > 0 {
		out.Unmeasured = copyMap(s.unmeasured)
	}
	return out
}

// Measured counts the abandoned requests with a release time.
func (a *Abandoned) Measured() int64 { return a.Release.Count }

// AbandonedLines are the summary's lines on the abandoned requests.
func AbandonedLines(a *Abandoned) []string {
	if a == nil {
		return nil
	}
	var rules []string
	for _, k := range sortedKeys(a.Rules) {
		rules = append(rules, fmt.Sprintf("%s %d", k, a.Rules[k]))
	}
	out := []string{fmt.Sprintf("Abandoned: %d requests closed by the probe as a user pressing stop (%s): not errors, not in the latency statistics",
		a.Count, strings.Join(rules, ", "))}
	if a.Measured() > 0 {
		out = append(out, fmt.Sprintf("Slot release (stream closed → server's running gauge free, ms; %d measured; from %s): p50 %.2f  p90 %.2f  p99 %.2f  max %.2f",
			a.Measured(), strings.Join(a.ReleaseSources, ", "), a.Release.P50, a.Release.P90, a.Release.P99, a.Release.Max))
	}
	for _, k := range sortedKeys(a.Unmeasured) {
		out = append(out, fmt.Sprintf("Slot release not measured for %d: %s", a.Unmeasured[k], k))
	}
	return out
}

// abandonedInsight says how many requests the probe abandoned and how long
// their slots took to be freed.
func abandonedInsight(s *Snapshot, add addInsight) {
	a := s.Abandoned
	if a == nil {
		return
	}
	msg := fmt.Sprintf("%d requests abandoned by the probe (not errors)", a.Count)
	values := map[string]float64{"abandoned": float64(a.Count)}
	if a.Measured() > 0 {
		msg += fmt.Sprintf("; slot release p50 %.1f ms, p99 %.1f ms after the stream closed (%d measured, from %s, assuming latscope is the only client)",
			a.Release.P50, a.Release.P99, a.Measured(), strings.Join(a.ReleaseSources, ", "))
		values["release_p50_ms"], values["release_p99_ms"] = a.Release.P50, a.Release.P99
	}
	add(msg, values)
}
