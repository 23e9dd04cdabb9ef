package sweepjudge

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// meter measures one step from the event stream. All its time comes from
// the events (a request counts at its completion), so a recorded sweep
// measures the same when replayed. One goroutine owns it.
//
// The step's timeline, in event time:
//
//	start ── warm-up ──► from ── measured ──► to (decided) ── cool-down ──► end marker
//
// Requests sent before from are warm-up, those sent at or after to are
// cool-down, those cancelled when the step ended are cut; only the rest
// enter the statistics. Throughput counts successful completions landing
// in [from, to], whenever they were sent.
type meter struct {
	set  *Rules
	spec StepSpec

	start, from time.Time
	to          time.Time // zero until the step is decided
	clock       time.Time // latest event time of the step
	reqClock    time.Time // latest request completion
	nextCheck   time.Time

	// judge judges what the step's probe only measured (its stalls, its
	// limit), on every event of the step, as the probe itself did before
	// it left that to the aggregator; agg takes what it returns.
	judge    *aggregate.ProbeJudge
	agg      *aggregate.Aggregator // the measured requests: the step's statistics and counts
	ttft     []point               // measured successful requests: completion, TTFT in ms
	queue    []point               // server queue depth over the measured part
	inFlight []point               // probe requests in flight over the measured part

	offered           int64 // requests sent in the measured part, cut ones too
	completed, tokens int64 // successful completions in [from, to]
	cooldown, cut     int64 // requests sent after the measured part, and cut off by the step's end

	records     int64 // request records of this step seen
	succeeded   int64 // successful ones, warm-up and cool-down too
	expect      int64 // request records the step's source emitted; -1 until its end marker
	endTime     time.Time
	endCause    string
	interrupted bool // the sweep was stopped while the step ran

	state   state
	reason  string
	decided bool
	signals Signals
}

// newMeter starts measuring the step spec at start. header is the live
// session's header, or nil.
func newMeter(set *Rules, header *event.Session, spec StepSpec, start time.Time) *meter {
	from := start.Add(set.Warmup)
	m := &meter{
		set: set, spec: spec, start: start, from: from,
		clock: start, nextCheck: from.Add(set.Window),
		judge:  aggregate.NewProbeJudge(),
		agg:    aggregate.New(aggregate.Config{SLO: set.SLO}),
		expect: -1,
	}
	if header != nil {
		// The session's server decides which signatures are evidence of
		// a stall's cause: each step's judge is told, as the stream was.
		m.judge.Add(event.NewSession(header))
	}
	return m
}

// add takes one event of the step. It returns true when this event decided
// the step: it is steady, saturated, failing, or past its maximum time.
func (m *meter) add(ev event.Event) bool {
	ev, derived := m.judge.Add(ev)
	m.take(ev)
	m.addMarkers(derived)
	return m.maybeDecide()
}

// addMarkers takes the markers the judge derived: those in the measured
// part go to the statistics, as every marker of the step's does.
func (m *meter) addMarkers(ms []event.Marker) {
	for i := range ms {
		m.take(event.NewMarker(&ms[i]))
	}
}

// take takes one judged event of the step.
func (m *meter) take(ev event.Event) {
	switch {
	case ev.Request != nil:
		m.addRequest(ev)
	case ev.Server != nil:
		m.see(ev.Server.Time)
		if m.measuring(ev.Server.Time) {
			m.agg.Add(ev)
			if w := ev.Server.Waiting; w != nil && !ev.Server.Stale && finite(*w) {
				m.queue = appendBounded(m.queue, point{ev.Server.Time, *w})
			}
		}
	case ev.Probe != nil:
		m.see(ev.Probe.Time)
		if m.measuring(ev.Probe.Time) {
			m.agg.Add(ev)
			m.inFlight = appendBounded(m.inFlight, point{ev.Probe.Time, float64(ev.Probe.InFlight)})
		}
	default:
		t := ev.Time()
		m.see(t)
		if m.measuring(t) {
			m.agg.Add(ev)
		}
	}
}

// measuring reports whether t lies in the measured part (so far).
func (m *meter) measuring(t time.Time) bool {
	return !t.Before(m.from) && (m.to.IsZero() || !t.After(m.to))
}

func (m *meter) see(t time.Time) {
	if t.After(m.clock) {
		m.clock = t
	}
}

func (m *meter) addRequest(ev event.Event) {
	r := ev.Request
	m.records++
	sent, end := r.SentAt(), r.EndedAt()
	m.see(end)
	if end.After(m.reqClock) {
		m.reqClock = end
	}
	inWindow := !sent.Before(m.from) && (m.to.IsZero() || sent.Before(m.to))
	if inWindow {
		m.offered++
	}
	if r.Outcome == event.OutcomeCancelled {
		// In flight when the step ended: its latency is unknown, only
		// that it was at least its age.
		m.cut++
		return
	}
	if r.OK() {
		m.succeeded++
	}
	switch {
	case sent.Before(m.from):
		w := *r
		w.Warmup = true
		m.agg.Add(event.NewRequest(&w))
	case !inWindow:
		m.cooldown++
		return
	default:
		m.agg.Add(ev)
		if r.OK() && r.TTFT > 0 {
			m.ttft = append(m.ttft, point{end, float64(r.TTFT) / float64(time.Millisecond)})
			m.pruneTTFT()
		}
	}
	if r.OK() && !end.Before(m.from) && (m.to.IsZero() || !end.After(m.to)) {
		m.completed++
		m.tokens += int64(max(r.OutputTokens, 0))
	}
}

// minTrendRequests is the fewest completions a TTFT trend is fitted
// through: minTrendPoints groups of minPerGroup.
const minTrendRequests = minTrendPoints * minPerGroup

// recentTTFT returns the completions the TTFT trend is fitted through and
// the stretch they cover: those of the last window, or, where the window
// holds too few for a trend (a low rate), the last minTrendRequests of the
// measured part over their longer stretch, so that a slow step is judged
// on as many requests as a fast one rather than running to --step-max.
// (m.ttft holds measured completions only; pruning keeps the last window
// and the last minTrendRequests of them.)
func (m *meter) recentTTFT() ([]point, time.Duration) {
	w := m.set.Window
	recent := within(m.ttft, m.reqClock.Add(-w), m.reqClock)
	if len(recent) >= minTrendRequests || len(m.ttft) <= len(recent) {
		return recent, w
	}
	sorted := slices.Clone(m.ttft)
	slices.SortFunc(sorted, func(a, b point) int { return a.t.Compare(b.t) })
	last := sorted[max(0, len(sorted)-minTrendRequests):]
	return last, max(w, m.reqClock.Sub(last[0].t))
}

// pruneTTFT drops latencies older than the trend needs, once they make up
// half the slice, so a long step holds about one window of them (and never
// fewer than the last minTrendRequests).
func (m *meter) pruneTTFT() {
	cut := m.reqClock.Add(-m.set.Window)
	if len(m.ttft) < 64 || !m.ttft[len(m.ttft)/2].t.Before(cut) {
		return
	}
	keep := m.ttft[:0]
	for i, p := range m.ttft {
		if !p.t.Before(cut) || i >= len(m.ttft)-minTrendRequests {
			keep = append(keep, p)
		}
	}
	m.ttft = keep
}

// maxSeriesPoints bounds a backlog series; past it every other reading is
// dropped, which keeps the whole step's line.
const maxSeriesPoints = 4096

func appendBounded(pts []point, p point) []point {
	if len(pts) >= maxSeriesPoints {
		n := 0
		for i := 0; i < len(pts); i += 2 {
			pts[n] = pts[i]
			n++
		}
		pts = pts[:n]
	}
	return append(pts, p)
}

// minErrorSample is how many measured requests the error rate needs before
// it can end a step early.
const minErrorSample = 20

// maybeDecide applies the rules every Interval of event time.
func (m *meter) maybeDecide() bool {
	if m.decided || m.clock.Before(m.nextCheck) {
		return false
	}
	for !m.nextCheck.After(m.clock) {
		m.nextCheck = m.nextCheck.Add(m.set.Interval)
	}
	m.signals = m.signalsAt(m.clock)
	if measured, _, _ := m.agg.Counts(); measured >= minErrorSample && m.errorRate() > m.set.StopErrors {
		return m.decide(undecided, fmt.Sprintf("errors %.1f%% passed the %.1f%% limit", 100*m.errorRate(), 100*m.set.StopErrors))
	}
	st, why := assess(m.signals, m.set.Window)
	if st != undecided {
		return m.decide(st, why)
	}
	if m.clock.Sub(m.start) >= m.set.StepMax {
		if grew, what := m.wholeGrowth(); grew {
			return m.decide(saturated, what)
		}
		return m.decide(undecided, fmt.Sprintf("not steady within %s: %s", m.set.StepMax, why))
	}
	return false
}

// wholeGrowth reports whether a backlog grew over the whole measured part,
// for a step that ends without the rules having decided it.
func (m *meter) wholeGrowth() (bool, string) {
	for _, b := range []struct {
		t    Trend
		name string
	}{{m.signals.QueueAll, "queue"}, {m.signals.InFlightAll, "requests in flight"}} {
		if b.t.Growing() {
			return true, fmt.Sprintf("%s grew by %.1f over the step (limit %.1f): arrivals exceed completions", b.name, b.t.Change, b.t.Limit)
		}
	}
	return false, ""
}

func (m *meter) decide(st state, reason string) bool {
	m.decided, m.state, m.reason, m.to = true, st, reason, m.clock
	return true
}

func (m *meter) errorRate() float64 {
	measured, errors, _ := m.agg.Counts()
	if measured == 0 {
		return 0
	}
	return float64(errors) / float64(measured)
}

// signalsAt fits the step's trends at now: TTFT over the last window of
// completions (or the last minTrendRequests of them, where the window holds
// fewer), the backlogs over the last window and the whole measured part.
func (m *meter) signalsAt(now time.Time) Signals {
	w, tol, grow := m.set.Window, m.set.Tolerance, m.set.MinGrowth
	whole := now.Sub(m.from)
	ttft, ttftSpan := m.recentTTFT()
	return Signals{
		TTFT:        trendOf(medianPoints(ttft), ttftSpan, tol, ttftFloorMS),
		Queue:       trendOf(within(m.queue, now.Add(-w), now), w, tol, grow),
		InFlight:    trendOf(within(m.inFlight, now.Add(-w), now), w, tol, grow),
		QueueAll:    trendOf(within(m.queue, m.from, now), whole, tol, grow),
		InFlightAll: trendOf(within(m.inFlight, m.from, now), whole, tol, grow),
	}
}

// ended takes the step's end marker: how many request records its source
// emitted (the step is complete once all of them have been seen) and why
// it stopped.
func (m *meter) ended(t time.Time, records int64, cause string, interrupted bool) {
	m.see(t)
	m.endTime, m.expect, m.endCause, m.interrupted = t, records, cause, interrupted
	m.addMarkers(m.judge.Flush()) // the step's probe has stopped: its pending stalls are whole
}

// finish judges a step whose source stopped before the rules decided it
// (it ended by itself, or its wall-clock limit passed), on what it had.
func (m *meter) finish() {
	m.addMarkers(m.judge.Flush())
	if m.decided || m.interrupted {
		return
	}
	m.signals = m.signalsAt(m.clock)
	st, why := assess(m.signals, m.set.Window)
	if grew, what := m.wholeGrowth(); st == undecided && grew {
		st, why = saturated, what
	}
	m.decide(st, m.endCause+": "+why)
}

// complete reports whether every record of the step has been seen.
func (m *meter) complete() bool { return m.expect >= 0 && m.records >= m.expect }

// phase says where the step is now.
func (m *meter) phase() Phase {
	switch {
	case m.decided || m.expect >= 0:
		return PhaseCoolDown
	case m.clock.Before(m.from):
		return PhaseWarmup
	}
	return PhaseMeasuring
}

// result computes the step's figures over what was measured so far.
func (m *meter) result() (Step, aggregate.Snapshot) {
	to := m.to
	if to.IsZero() {
		to = m.clock
	}
	snap := m.agg.Snapshot(m.agg.Latest())
	sum := snap.Summary()
	s := Step{
		StepSpec: m.spec,
		Start:    m.start, End: m.endTime,
		Sent: sum.Requests.Sent, OK: sum.Requests.OK, Errors: sum.Requests.Errors,
		ErrorRate: m.errorRate(),
		Warmup:    sum.Requests.Warmup, Cooldown: m.cooldown, Cut: m.cut,
		TTFT: sum.TTFT, ITL: sum.ITL, TPOT: sum.TPOT, E2E: sum.E2E,
		Signals: m.signals,
	}
	if to.After(m.from) {
		s.Measured = to.Sub(m.from)
		secs := s.Measured.Seconds()
		s.Offered = float64(m.offered) / secs
		s.Throughput = float64(m.completed) / secs
		s.TokPerSec = float64(m.tokens) / secs
		if sum.Requests.Good != nil {
			g := float64(*sum.Requests.Good) / secs
			s.Goodput = &g
		}
	}
	breakdownOf(&s, snap.Windows[aggregate.WinRun].Bands[aggregate.BandMean])
	if q := sum.Server.QueueDepth; q.Seen {
		s.HasQueueDepth, s.QueueDepth = true, q.Mean
	}
	s.Reason = m.reason
	switch {
	case m.decided:
		s.Steady, s.Saturated = m.state == steady, m.state == saturated
	case m.interrupted:
		s.Interrupted, s.Reason = true, "interrupted before it was judged"
	default:
		s.Reason = "running"
	}
	s.ErrorsOver = s.ErrorRate > m.set.StopErrors
	// Past capacity the measured requests may all be cut off while older
	// ones complete in the measured part: that measures the server. A
	// server that died in the warm-up has successes only before it.
	if m.decided && !s.Interrupted && s.OK == 0 && m.completed == 0 {
		s.Failed = noSuccess(sum, m.cut, m.succeeded > 0)
	}
	s.SLO = checks(aggregate.Evaluate(sum, m.set.SLO))
	s.Pass = !s.StopsSweep() && s.OK > 0
	for _, c := range s.SLO {
		s.Pass = s.Pass && c.Pass
	}
	return s, snap
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
