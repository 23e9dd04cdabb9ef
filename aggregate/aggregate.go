// Package aggregate is the one place where latscope's samples become
// statistics. One goroutine owns an Aggregator: it Adds every event from the
// sources' shared channel and takes immutable Snapshots (about 4 Hz) for the
// status line and the dashboard, and a Summary at the end for the report.
//
// All time comes from the events themselves (a request counts at its
// completion, Intended + E2E), never from the wall clock, so a replayed
// session aggregates exactly as the live run did. Windows (last 10 s, 1 min,
// 5 min, and the whole run) are rings of time slots holding sparse HDR
// histograms, merged only when a snapshot is taken.
//
// Definitions used throughout:
//
//   - TTFT (time to first token): from the intended send time to the arrival
//     of the first chunk that carries content. Counting from the intended time
//     rather than the actual send keeps a late probe from hiding queueing.
//   - ITL (inter-token latency): the gap between two consecutive content
//     chunks, one gap per chunk however many tokens it carries.
//   - TPOT (time per output token): (E2E − TTFT) / (output tokens − 1).
//   - E2E (end to end): from the intended send time to the end of the stream.
//
// Every derived statement is made here, once, for every surface (dashboard,
// summary, reports, replays, attached views): statistics per window, SLO
// verdicts (Evaluate, EvaluateWindow), insights, the markers derived from
// the requests (SLO breaches, error bursts, Nagle suspects), what the
// probe only measured judged from its raw samples (ProbeJudge: the pauses
// its streams shared and their causes, its scheduling lag and whether it
// was the limit, each request's Nagle suspicion), and the dashboard's
// request sample (Snapshot.Sample), all on event time so a replay derives
// what the live run did.
//
// Latency statistics (TTFT, ITL, TPOT, E2E, tokens/s, client and breakdown
// stages) come from successful requests only; the scheduling lag comes from
// every request. Warm-up requests are counted apart and kept out of all
// statistics.
package aggregate

import (
	"math"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// Limits on distinct keys taken from input, so a malformed stream cannot grow
// the aggregator's maps without bound. Keys past a limit are counted under
// an overflow key or dropped and counted.
const (
	maxStageKeys  = 64
	maxCountKeys  = 64
	maxSources    = 16
	defaultRecent = 50
)

// Config tunes an Aggregator. The zero value is usable.
type Config struct {
	// OfferedRate is the open-loop arrival rate the probe was asked for, in
	// requests per second; 0 when unknown or closed loop. The queue-growth
	// insight compares it with the completion rate. Without it the arrival
	// rate is estimated from the intended send times of finished requests,
	// which lags because a request is seen only when it ends.
	OfferedRate float64
	// Now is the clock Run reads for each snapshot's window edges. Nil means
	// the latest event time seen, which is deterministic (replays, tests);
	// a live run should pass time.Now so the windows move when nothing arrives.
	Now func() time.Time
	// RecentMarkers is how many recent markers to keep (default 50).
	RecentMarkers int
	// SLO are the run's objectives; with latency objectives the aggregator
	// counts goodput, the requests that met every one of them.
	SLO []Objective
	// TTFTBasis is which first token the TTFT bar, the goodput and the
	// ttft objectives use; "" is BasisAnswer (see reasoning.go).
	TTFTBasis TTFTBasis
	// SampleKeep is how many requests each list of the snapshots' request
	// sample holds (Snapshot.Sample): 0 means DefaultSampleKeep, a
	// negative number no sample.
	SampleKeep int
}

// Aggregator turns events into statistics. It is not safe for concurrent
// use: one goroutine owns it (see Run).
type Aggregator struct {
	cfg    Config
	mg     *merger
	limits requestLimits

	reqStart, reqEnd time.Time // first intended send, last completion (non-warm-up requests)
	cutEnd           time.Time // last cancelled request's end: the run's, when none finished
	latest           time.Time // latest timestamp of any event

	ttft, itl, tpot, e2e, tokRate, schedLag *metric
	stages                                  map[event.Stage]*metric
	breakdown                               map[event.Stage]*bdStage
	bands                                   *bandTracker
	slots                                   *stageSlots // the breakdown's stage names, the bands' too
	bdRequests                              int64
	bdTTFT                                  int64 // µs, summed over requests with a breakdown
	reasoning                               reasoningState
	reasoned                                bool // a successful request streamed reasoning

	counts       runCounts
	h2           h2Tally // the requests' HTTP/2 streams
	fineCounts   *ring[counts]
	coarseCounts *ring[counts]
	arrivals     *ring[int64] // coarse, by intended send time

	server  serverState
	gpu     *event.GPUSample
	host    hostState // the client host's CPU pressure
	markers markerState
	derive  deriver            // SLO breach, error burst and Nagle markers
	stalls  stallTally         // stall markers by cause, for the insights
	session *event.Session     // the session's header, when one came
	probe   *event.ProbeSample // the probe's latest view of itself
	probeEv probeEvidence      // the probe's word on its own pace, for the verdict
	lost    map[string]int64   // events consumers missed, by consumer
	unrec   Unrecorded         // events the recording could not write
	unexp   Unrecorded         // spans the OTLP collector never got

	clamped      int64 // values outside the histograms' range, clamped into it
	droppedStage int64 // stage values dropped because of maxStageKeys

	judge  *ProbeJudge     // what the probe only measured, judged
	sample *requestSampler // the dashboard's request lists; nil without
	ended  bool            // Run's input closed: the session is over

	lengths lengthFiles // the successful requests by prompt and output length
	turns   turnFiles   // the successful requests by turn and cached share
	abandon abandonState
	users   userSpanState // the server's users' requests, from its spans
}

// runCounts are whole-run request counters. sent = ok + errors + runEnded
// + abandoned.
type runCounts struct {
	sent, ok, errors, warmup, tokens, good int64
	runEnded                               int64 // cancelled by the run's end (see cancelledAtEnd)
	abandoned                              int64 // abandoned by the probe on purpose
	byOutcome                              map[event.Outcome]int64
	byStatus                               map[int]int64
	flags                                  map[event.Flag]int64
	messages                               map[errorKey]int64
}

// errorKey groups failed requests by outcome and message.
type errorKey struct {
	outcome event.Outcome
	message string
}

// counts are the request counters of one window slot.
type counts struct {
	sent, ok, errors, tokens, good int64
	// prompt and cached are the successful requests' prompt tokens and
	// the part of them the server reported from its prefix cache.
	prompt, cached int64
}

// bdStage is one breakdown stage over the run: its values, and how often each
// provenance was seen for it, over the run and per window slot.
type bdStage struct {
	m       *metric
	prov    map[event.Provenance]int64
	mix     ProvenanceMix // the run's
	windows provTracker
}

// New returns an empty Aggregator.
func New(cfg Config) *Aggregator {
	if cfg.RecentMarkers <= 0 {
		cfg.RecentMarkers = defaultRecent
	}
	var sample *requestSampler
	switch {
	case cfg.SampleKeep == 0:
		sample = newRequestSampler(DefaultSampleKeep)
	case cfg.SampleKeep > 0:
		sample = newRequestSampler(cfg.SampleKeep)
	}
	resetCounts := func(c *counts) { *c = counts{} }
	slots := &stageSlots{}
	return &Aggregator{
		judge:     NewProbeJudge(),
		sample:    sample,
		cfg:       cfg,
		mg:        newMerger(),
		limits:    limitsFrom(cfg.SLO, cfg.TTFTBasis),
		ttft:      newMetric(),
		itl:       newMetric(),
		tpot:      newMetric(),
		e2e:       newMetric(),
		tokRate:   newMetric(),
		schedLag:  newMetric(),
		stages:    make(map[event.Stage]*metric),
		breakdown: make(map[event.Stage]*bdStage),
		bands:     newBandTracker(cfg.TTFTBasis, slots),
		slots:     slots,
		reasoning: newReasoningState(),
		counts: runCounts{
			byOutcome: make(map[event.Outcome]int64),
			byStatus:  make(map[int]int64),
			flags:     make(map[event.Flag]int64),
			messages:  make(map[errorKey]int64),
		},
		fineCounts:   newRing(fineWidth, fineSlots, resetCounts),
		coarseCounts: newRing(coarseWidth, coarseSlots, resetCounts),
		arrivals:     newRing(coarseWidth, coarseSlots, func(n *int64) { *n = 0 }),
		server:       newServerState(),
		markers:      newMarkerState(cfg.RecentMarkers),
		derive:       newDeriver(cfg.SLO),
		lost:         make(map[string]int64),
	}
}

// Add takes one event. It never blocks and does no I/O. The event's payload
// is treated as read-only from here on and may be referenced by snapshots.
// A probe's raw evidence is judged first (ProbeJudge): the markers it
// derives are added after the event.
func (a *Aggregator) Add(ev event.Event) {
	if r := ev.Request; r != nil && r.HasFlag(event.FlagServerReported) {
		a.add(ev) // the server's record of a user's request: nothing of the probe's to judge
		return
	}
	ev, derived := a.judge.Add(ev)
	a.add(ev)
	for i := range derived {
		a.add(event.NewMarker(&derived[i]))
	}
}

// finish judges what the end of the events completes: the stalls still
// pending, and the error-burst period cut short. It is idempotent.
func (a *Aggregator) finish() {
	for _, m := range a.judge.Flush() {
		a.add(event.NewMarker(&m))
	}
	a.finishBursts()
}

func (a *Aggregator) add(ev event.Event) {
	switch {
	case ev.Request != nil:
		a.addRequest(ev.Request)
	case ev.Server != nil:
		a.see(ev.Server.Time)
		x := ev.Server
		if x.Time != x.Time.Round(0) {
			// Wall-clock time only, as for requests (a copy: the payload
			// is shared with the other consumers).
			c := *x
			c.Time = c.Time.Round(0)
			x = &c
		}
		a.server.add(x)
		a.turns.series.addServer(x)
	case ev.GPU != nil:
		a.see(ev.GPU.Time)
		a.gpu = ev.GPU
	case ev.Marker != nil:
		a.see(ev.Marker.Time)
		a.markers.add(ev.Marker)
		a.stalls.add(ev.Marker)
		a.probeEv.addMarker(ev.Marker)
	case ev.Session != nil:
		a.see(ev.Session.Time)
		a.session = ev.Session
		// A replayed or attached session brings its own TTFT basis and
		// objectives.
		if a.cfg.TTFTBasis == "" {
			if b, err := ParseTTFTBasis(ev.Session.Load.TTFTBasis); err == nil {
				a.cfg.TTFTBasis, a.bands.basis = b, b
				a.limits.basis = b
			}
		}
		if len(a.cfg.SLO) == 0 && ev.Session.Load.SLO != "" {
			a.sessionObjectives(ev.Session)
		}
	case ev.Probe != nil:
		a.see(ev.Probe.Time)
		a.probe = ev.Probe
		a.probeEv.addSample(ev.Probe)
	case ev.Loss != nil:
		a.addLoss(ev.Loss)
	case ev.Host != nil:
		a.see(ev.Host.Time)
		if m := a.host.add(ev.Host); m != nil {
			a.markers.add(m)
		}
	}
	// Spans are joined onto requests before the aggregator; one that reaches
	// it has nothing to add.
}

// addLoss counts events that some consumer did not get.
func (a *Aggregator) addLoss(l *event.Loss) {
	switch l.Consumer {
	case event.ConsumerRecorder:
		// In the statistics, only not in the file: counted apart from Lost.
		a.see(l.Time)
		a.unrec.Events += max(l.Events, 0)
		if a.unrec.Reason == "" {
			a.unrec.Reason = l.Reason
		}
	case event.ConsumerExport:
		// Each record's reason carries the export's counts so far: the
		// latest says the most.
		a.unexp.Events += max(l.Events, 0)
		if l.Reason != "" {
			a.unexp.Reason = l.Reason
		}
	default:
		a.see(l.Time)
		key := l.Consumer
		if _, ok := a.lost[key]; !ok && len(a.lost) >= maxCountKeys {
			key = "other"
		}
		a.lost[key] += max(l.Events, 0)
	}
}

func (a *Aggregator) see(t time.Time) {
	if t = t.Round(0); t.After(a.latest) {
		a.advance(t)
		a.latest = t
	}
}

func (a *Aggregator) addRequest(r *event.Request) {
	if r.Warmup {
		a.counts.warmup++
		return
	}
	if a.sample != nil {
		a.sample.add(r)
	}
	if r.HasFlag(event.FlagServerReported) {
		// One of the server's users' requests, from its span: kept apart
		// from every statistic of latscope's own requests.
		a.addUserSpan(r, r.EndedAt().Round(0))
		return
	}
	a.h2.add(r)
	// Wall-clock times only, as a recording keeps them: a live time's
	// monotonic reading is taken apart from its wall-clock one, and on a
	// busy machine the two can be microseconds out of step, so spans taken
	// from them would differ from the same spans replayed.
	sent, end := r.SentAt().Round(0), r.EndedAt().Round(0)
	if !sent.IsZero() && (a.reqStart.IsZero() || sent.Before(a.reqStart)) {
		a.reqStart = sent
	}
	a.see(end)
	if cancelledAtEnd(r) {
		// It never finished: it neither ends the run's span nor counts as
		// an error, only as sent. Its end is the run's, which is the span's
		// end only when no request finished (see requests).
		if end.After(a.cutEnd) {
			a.cutEnd = end
		}
		a.counts.sent++
		a.counts.runEnded++
		a.counts.tokens += int64(max(r.OutputTokens, 0))
		return
	}
	if end.After(a.reqEnd) {
		a.reqEnd = end
	}
	if r.Abandoned() {
		// Closed by the probe on purpose: counted apart, its latencies
		// kept out of every statistic.
		a.counts.sent++
		a.counts.abandoned++
		a.counts.tokens += int64(max(r.OutputTokens, 0))
		a.abandon.add(r)
		return
	}

	a.countRequest(r, end)
	if n := a.arrivals.slot(sent); n != nil {
		*n++
	}
	a.recordDur(a.schedLag, end, r.SchedLag)
	if !r.OK() {
		return
	}
	a.recordLatencies(r, end)
	a.abandon.itl.addGaps(r)
	a.lengths.add(r)
	a.addCache(r, end)
	a.recordStages(r, end)
	a.recordReasoning(r, end)
	a.recordBreakdown(r, end)
}

// cancelledAtEnd reports whether r was cut short by the run's end (its
// duration and drain over, a signal, a quit), rather than failing: see
// event.Request.RunEnded. Only the run cancels a request, so a cancelled
// one without RunEnded (recorded before a signal's cancellations were
// marked) counts the same: one rule for every surface.
func cancelledAtEnd(r *event.Request) bool {
	return r.Outcome == event.OutcomeCancelled
}

func (a *Aggregator) countRequest(r *event.Request, end time.Time) {
	c := &a.counts
	c.sent++
	tokens := int64(max(r.OutputTokens, 0))
	c.tokens += tokens
	okN, errN, goodN := int64(0), int64(0), int64(0)
	if a.limits.set && a.limits.good(r) {
		c.good++
		goodN = 1
	}
	if r.OK() {
		c.ok++
		okN = 1
	} else {
		c.errors++
		errN = 1
		bump(c.byOutcome, r.Outcome, "other")
		if r.Outcome == event.OutcomeHTTPStatus && r.Status != 0 {
			bump(c.byStatus, r.Status, -1)
		}
		bump(c.messages, errorKey{r.Outcome, errorText(r.Error)}, errorKey{"other", "(more distinct messages than latscope keeps)"})
	}
	for _, f := range r.Flags {
		bump(c.flags, f, "other")
	}
	a.derive.count(r)
	for _, s := range []*counts{a.fineCounts.slot(end), a.coarseCounts.slot(end)} {
		if s != nil {
			s.sent++
			s.ok += okN
			s.errors += errN
			s.tokens += tokens
			s.good += goodN
		}
	}
}

// bump counts key in m, or under overflow once m holds maxCountKeys keys.
func bump[K comparable](m map[K]int64, key, overflow K) {
	if _, ok := m[key]; !ok && len(m) >= maxCountKeys {
		key = overflow
	}
	m[key]++
}

func (a *Aggregator) recordDur(m *metric, t time.Time, d time.Duration) {
	if m.record(t, int64(d/time.Microsecond)) {
		a.clamped++
	}
}

func (a *Aggregator) recordLatencies(r *event.Request, end time.Time) {
	if r.TTFT > 0 {
		a.recordDur(a.ttft, end, r.TTFT)
	}
	if r.E2E > 0 {
		a.recordDur(a.e2e, end, r.E2E)
	}
	if tpot := r.TPOT(); tpot > 0 {
		a.recordDur(a.tpot, end, tpot)
	}
	if rate := r.TokensPerSecond(); rate > 0 && !math.IsInf(rate, 0) {
		// Recorded in milli-tokens/s so the integer histogram keeps 3 decimals.
		v := rate * displayFactor
		if v > float64(histHighest) {
			v = float64(histHighest) + 1 // clamp below counts it
		}
		if a.tokRate.record(end, int64(v)) {
			a.clamped++
		}
	}
	// The ITL loop runs once per chunk: find the slots once, then each value
	// is three histogram increments and no allocation.
	if len(r.Chunks) > 1 {
		a.clamped += a.itl.recordGaps(end, r.Chunks)
	}
}

func (a *Aggregator) recordStages(r *event.Request, end time.Time) {
	for _, st := range r.Stages {
		a.recordStage(st.Stage, end, st.Duration)
	}
}

// recordStage records one client stage's value.
func (a *Aggregator) recordStage(stage event.Stage, end time.Time, d time.Duration) {
	m := a.stages[stage]
	if m == nil {
		if len(a.stages) >= maxStageKeys {
			a.droppedStage++
			return
		}
		m = newMetric()
		a.stages[stage] = m
	}
	a.recordDur(m, end, d)
}

func (a *Aggregator) recordBreakdown(r *event.Request, end time.Time) {
	if len(r.Breakdown) == 0 {
		return
	}
	a.bdRequests++
	a.bdTTFT += int64(r.TTFT / time.Microsecond)
	a.bands.add(end, r)
	// Stages past the named ones are one value per request, "other", as
	// the bands sum them (stageSlots).
	var other time.Duration
	var otherProv event.Provenance
	for _, st := range r.Breakdown {
		name := a.slots.nameOf(st.Stage)
		if name == stageOther {
			other += st.Duration
			if otherProv == "" {
				otherProv = st.Provenance
			}
			continue
		}
		a.recordBreakdownStage(name, end, st.Duration, st.Provenance)
	}
	if otherProv != "" {
		a.recordBreakdownStage(stageOther, end, other, otherProv)
	}
}

// recordBreakdownStage records one request's value of breakdown stage name.
func (a *Aggregator) recordBreakdownStage(name event.Stage, end time.Time, d time.Duration, p event.Provenance) {
	b := a.breakdown[name]
	if b == nil {
		if len(a.breakdown) >= maxStageKeys {
			a.droppedStage++
			return
		}
		b = &bdStage{m: newMetric(), prov: make(map[event.Provenance]int64), windows: newProvTracker()}
		a.breakdown[name] = b
	}
	a.recordDur(b.m, end, d)
	bump(b.prov, p, "other")
	b.mix.add(p)
	b.windows.add(end, p)
}

// maxErrorText bounds an error message kept for the summary.
const maxErrorText = 200

// errorText is an error message as the summary groups it: trimmed and cut.
func errorText(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return "(no message)"
	}
	if len(msg) > maxErrorText {
		msg = strings.ToValidUTF8(msg[:maxErrorText], "") + "…"
	}
	return msg
}
