package aggregate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// Marker kinds the aggregator derives from the requests themselves, beside
// the markers sources send. Like every derived statement they are made
// here, once, so the dashboard, the summary, the reports, a replay and an
// attached view all list the same ones.
const (
	MarkerSLOBreach  event.MarkerKind = "slo"
	MarkerErrorBurst event.MarkerKind = "errors"
)

// DerivedSource is the Source of the markers the aggregator derives.
const DerivedSource = "aggregate"

// Detector settings. An objective is breached when it is broken on
// BreachWindow for a whole BreachWindow; an error burst is at least
// burstMin errors, or burstShare of the requests, in one BurstPeriod of
// completion time; a Nagle marker counts the requests flagged Nagle suspect
// in one BurstPeriod.
const (
	BreachWindow = Win10s
	BurstPeriod  = 10 * time.Second
	burstMin     = 3
	burstShare   = 0.05
	// breachSeconds is how often (in event time) objectives are judged.
	breachSeconds = int64(fineWidth)
)

// deriver makes the derived markers. It runs on event time only (the
// completion and sample times the events carry), never on when snapshots
// are taken, so a replay at any speed derives exactly the markers the live
// run did.
type deriver struct {
	objectives  []Objective
	breachSince []time.Time // zero while the objective holds
	reported    []bool
	judgedSec   int64 // last second edge the objectives were judged at

	period int64 // the BurstPeriod being counted
	burst  burstTally
}

// burstTally counts one BurstPeriod's finished requests.
type burstTally struct {
	finished  int64
	byOutcome map[event.Outcome]int64
	byStatus  map[int]int64
	nagle     int64
}

func newDeriver(objectives []Objective) deriver {
	d := deriver{judgedSec: noEpoch, period: noEpoch}
	d.setObjectives(objectives)
	d.burst.reset()
	return d
}

func (d *deriver) setObjectives(objectives []Objective) {
	d.objectives = objectives
	d.breachSince = make([]time.Time, len(objectives))
	d.reported = make([]bool, len(objectives))
}

func (b *burstTally) reset() {
	*b = burstTally{byOutcome: make(map[event.Outcome]int64), byStatus: make(map[int]int64)}
}

// count tallies a finished request into the current period. One that
// completed in an earlier period but came late counts here: a period is
// judged once, when event time leaves it.
func (d *deriver) count(r *event.Request) {
	b := &d.burst
	b.finished++
	if !r.OK() {
		bump(b.byOutcome, r.Outcome, "other")
		if r.Outcome == event.OutcomeHTTPStatus && r.Status != 0 {
			bump(b.byStatus, r.Status, -1)
		}
	}
	if slices.Contains(r.Flags, event.FlagNagleSuspect) {
		b.nagle++
	}
}

// advance moves event time to t, a time later than any seen so far, before
// the event at t is added: every second edge passed judges the objectives
// on the window that ends there, and a BurstPeriod passed is judged whole.
func (a *Aggregator) advance(t time.Time) {
	d := &a.derive
	if p := epochOf(t, int64(BurstPeriod)); d.period == noEpoch {
		d.period = p
	} else if p > d.period {
		a.judgeBurst(time.Unix(0, (d.period+1)*int64(BurstPeriod)))
		d.period = p
	}
	sec := epochOf(t, breachSeconds)
	if d.judgedSec == noEpoch || len(d.objectives) == 0 {
		d.judgedSec = sec
		return
	}
	for e := d.judgedSec + 1; e <= sec; e++ {
		// Past fineSlots seconds after the last data the window is empty:
		// one judgement at the end says so for all of them.
		if e > d.judgedSec+fineSlots+1 {
			e = sec
		}
		a.judgeBreaches(time.Unix(0, e*breachSeconds))
	}
	d.judgedSec = max(d.judgedSec, sec)
}

// judgeBreaches judges the objectives on BreachWindow ending at edge, and
// marks one that has been broken for a whole window, once per breach.
func (a *Aggregator) judgeBreaches(edge time.Time) {
	d := &a.derive
	// The window that ends just before edge: whole seconds, nothing of the
	// second that starts at it.
	ws := a.breachWindow(edge.Add(-time.Nanosecond))
	for i, r := range EvaluateWindow(&ws, d.objectives) {
		if !r.Broken() {
			d.breachSince[i], d.reported[i] = time.Time{}, false
			continue
		}
		if d.breachSince[i].IsZero() {
			d.breachSince[i] = edge
		}
		if !d.reported[i] && edge.Sub(d.breachSince[i]) >= BreachWindow.Span() {
			d.reported[i] = true
			a.addDerived(event.Marker{
				Time: edge, Kind: MarkerSLOBreach, Source: DerivedSource,
				Message: fmt.Sprintf("SLO %s broken for a whole %s window (now %s)", r.Objective, BreachWindow.Words(), r.GotText),
				Values:  map[string]float64{"got": r.Got, "limit": r.Objective.Value},
			})
		}
	}
}

// breachWindow is BreachWindow at now with only what objectives read: the
// latency statistics and the request counts.
func (a *Aggregator) breachWindow(now time.Time) WindowStats {
	ws := WindowStats{
		Window: BreachWindow,
		TTFT:   a.mg.stats(a.ttft, BreachWindow, now),
		ITL:    a.mg.stats(a.itl, BreachWindow, now),
		TPOT:   a.mg.stats(a.tpot, BreachWindow, now),
		E2E:    a.mg.stats(a.e2e, BreachWindow, now),
	}
	_, from, to, _ := bounds(BreachWindow, now)
	a.fineCounts.each(from, to, func(c *counts) {
		ws.Sent += c.sent
		ws.OK += c.ok
		ws.Errors += c.errors
	})
	return ws
}

// judgeBurst marks the period ending at end when it had an error burst or
// Nagle suspects, and starts the next one.
func (a *Aggregator) judgeBurst(end time.Time) {
	b := &a.derive.burst
	defer b.reset()
	kinds := errorKinds(b.byOutcome, b.byStatus)
	var n int64
	for _, k := range kinds {
		n += k.N
	}
	if n >= burstMin || n > 0 && float64(n) >= burstShare*float64(b.finished) {
		a.addDerived(event.Marker{
			Time: end, Kind: MarkerErrorBurst, Source: DerivedSource,
			Message: fmt.Sprintf("error burst: %s in %s (%.1f%% of %d finished requests)",
				JoinErrorKinds(kinds, 4), BurstPeriod, 100*float64(n)/float64(max(b.finished, 1)), b.finished),
			Values: map[string]float64{"errors": float64(n), "finished": float64(b.finished)},
		})
	}
	if b.nagle > 0 {
		a.addDerived(event.Marker{
			Time: end, Kind: event.MarkerGap, Source: DerivedSource,
			Message: fmt.Sprintf("Nagle suspect: %d of %d finished requests had inter-token gaps near 40 ms (delayed-ACK coalescing) in %s", b.nagle, b.finished, BurstPeriod),
			Values:  map[string]float64{"requests": float64(b.nagle), "finished": float64(b.finished)},
		})
	}
}

// finishBursts judges the period still open when the run ends: a burst in
// its last seconds is the one a report most needs. It is idempotent, the
// counts starting over after it.
func (a *Aggregator) finishBursts() {
	if b := &a.derive.burst; b.finished > 0 && !a.latest.IsZero() {
		a.judgeBurst(a.latest)
	}
}

func (a *Aggregator) addDerived(m event.Marker) {
	a.markers.add(&m)
}

// ErrorKind is one kind of error with its count: "429" (an HTTP status) or
// "stream_reset" (an outcome).
type ErrorKind struct {
	Name string
	N    int64
}

// ErrorKinds lists the errors by kind, an HTTP status standing for its
// http_status outcome, most frequent first.
func ErrorKinds(byOutcome map[event.Outcome]int64, byStatus map[int]int64) []ErrorKind {
	return errorKinds(byOutcome, byStatus)
}

func errorKinds(byOutcome map[event.Outcome]int64, byStatus map[int]int64) []ErrorKind {
	var out []ErrorKind
	var statusN int64
	for code, n := range byStatus {
		if n > 0 {
			out = append(out, ErrorKind{fmt.Sprint(code), n})
			statusN += n
		}
	}
	for k, n := range byOutcome {
		if k == event.OutcomeHTTPStatus {
			n -= statusN // those with a status are already listed by it
		}
		if n > 0 {
			out = append(out, ErrorKind{string(k), n})
		}
	}
	slices.SortFunc(out, func(a, b ErrorKind) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Name, b.Name)) })
	return out
}

// JoinErrorKinds writes "429 ×3, stream_reset ×1", at most max kinds.
func JoinErrorKinds(ks []ErrorKind, max int) string {
	var b strings.Builder
	for i, k := range ks {
		if i == max {
			fmt.Fprintf(&b, ", +%d more", len(ks)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s ×%d", k.Name, k.N)
	}
	return b.String()
}

// sessionObjectives takes a replayed or attached session's objectives. One
// that ParseSLO refuses is not guessed at: a note says why it is ignored.
func (a *Aggregator) sessionObjectives(s *event.Session) {
	objectives, err := ParseSLO(s.Load.SLO)
	if err != nil {
		a.addDerived(event.Marker{
			Time: s.Time, Kind: event.MarkerNote, Source: DerivedSource,
			Message: fmt.Sprintf("the session's objectives are ignored: %v", err),
		})
		return
	}
	a.limits = limitsFrom(objectives, a.cfg.TTFTBasis)
	a.derive.setObjectives(objectives)
}
