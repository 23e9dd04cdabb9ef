package aggregate

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/latscope/latscope/event"
)

// Snapshot is the aggregator's state at one moment. It is a value built
// fresh each time: nothing in it is touched again by the aggregator, so any
// goroutine may read it.
type Snapshot struct {
	// ByLength is the run's results by prompt and output length, in the
	// final snapshot only (Final): nil in a live one.
	ByLength *ByLength
	// LengthCounts is the same buckets with their counts alone, in every
	// snapshot: which lengths the run has sent so far.
	LengthCounts *ByLength
	// Turns is the run's results by conversation turn and cached share
	// (nil when no request had a turn or cached tokens); Abandoned the
	// requests the probe abandoned on purpose (nil when none).
	Turns     *Turns
	Abandoned *Abandoned
	Now       time.Time     // the window edge the snapshot was taken at
	Start     time.Time     // first intended send of the run (zero before any request)
	Elapsed   time.Duration // Now − the session's start (or Start, without a header)
	// Session is the session's header: target, server, load (nil without one).
	Session *event.Session
	// Probe is the probe's latest view of itself: in flight, CPU, scheduling
	// lag (nil before the first sample, and for sessions without a probe).
	Probe *event.ProbeSample
	// Verdict is the one judgement of whether latscope kept pace: every
	// surface shows it and none judges the probe by itself.
	Verdict ProbeVerdict
	// Lost counts events that did not reach this aggregator, by the consumer
	// that lost them (an attached agent's gap, a lossy relay). Empty when
	// nothing was lost.
	Lost map[string]int64
	// Unrecorded counts events the recording could not write (zero when
	// there is none, or it wrote everything).
	Unrecorded Unrecorded
	// Unexported counts the spans the OTLP collector never got (zero
	// without --otlp-export, or when it took them all).
	Unexported Unrecorded
	// Windows holds the statistics over the last 10 s, 1 min, 5 min and the
	// whole run, indexed by Window.
	Windows  [NumWindows]WindowStats
	Requests Requests
	// Reasoning counts what reasoning models did (nil when no request
	// reasoned); TTFTBasis is which first token the bar and the
	// objectives use.
	Reasoning *Reasoning
	TTFTBasis TTFTBasis
	Breakdown Breakdown
	Server    ServerStats
	GPU       *event.GPUSample // the latest GPU sample, nil before the first
	// Host is the client host's CPU pressure: its latest sample and the
	// run's figures (Samples 0 and Latest nil without a host collector).
	Host     HostStats
	Markers  Markers
	Insights []event.Marker
	// Objectives are the objectives the aggregator judges (Config.SLO, or
	// the session's): what the breach markers and goodput were judged on.
	// Shared, never modified.
	Objectives []Objective
	// Sample is the dashboard's requests view: the latest finished
	// requests and the slowest of each window (empty with a negative
	// Config.SampleKeep).
	Sample RequestSample
	// Ended is set on the last snapshot Run publishes: its events ended
	// (the session is over).
	Ended bool
}

// WindowStats are the statistics over one window. Requests count in the
// window that holds their completion time.
type WindowStats struct {
	Window Window
	// Span is the time the window covers: whole slots up to now, cut at the
	// start of the run.
	Span time.Duration

	Sent, OK, Errors, Tokens int64
	ReqPerSec, TokPerSec     float64 // Sent and Tokens over Span
	// Good counts the requests that met every latency objective (with
	// Config.SLO) and GoodPerSec is the goodput: Good over Span.
	Good       int64
	GoodPerSec float64

	TTFT, ITL, TPOT, E2E Stats
	// TTFTAnswer is to the first answer token (TTFT's own values for a
	// model that does not reason), Thinking a reasoning model's first
	// token → first answer token, TTST the time to the second token.
	TTFTAnswer, Thinking, TTST Stats
	// Basis is the run's TTFT basis: which of TTFT and TTFTAnswer the
	// objectives judge.
	Basis        TTFTBasis
	TokensPerSec Stats // per request, in tokens/s
	SchedLag     Stats
	Stages       map[event.Stage]Stats // client stages
	Breakdown    map[event.Stage]Stats // TTFT breakdown stages
	// BreakdownProvenance counts each breakdown stage's values in the
	// window by provenance: its Main says whether to mark it estimated.
	BreakdownProvenance map[event.Stage]ProvenanceMix
	// Bands are the mean breakdowns of the requests in each TTFT band
	// (every request, around p50 and p90, the slowest 1%): what a stacked
	// bar draws, since their stages add up to the band's TTFT.
	Bands [NumBands]Band

	// Traffic is what the server's metrics say of all the requests it
	// served in the window, latscope's own among them if it sent any.
	Traffic Traffic

	// PromptTokens and CachedTokens are the window's successful requests'
	// prompt tokens and the part the server reported from its prefix
	// cache; CacheHitRate is the second over the first (0 without
	// prompts). The server's own counters' rate is Traffic.PrefixHitRate.
	PromptTokens, CachedTokens int64
	CacheHitRate               float64

	ServerStageMeans map[string]float64 // ms, count-weighted over the window
	QueueDepthMean   float64            // plain mean of the queue-depth readings in the window
	HasQueueDepth    bool
}

// Requests are the whole run's request counters.
type Requests struct {
	Sent   int64 `json:"sent"` // ok + errors + cancelled_at_end + abandoned; warm-up excluded
	OK     int64 `json:"ok"`
	Errors int64 `json:"errors"`
	// CancelledAtEnd counts the requests still in flight when the run's
	// end cancelled them (its duration and drain over, SIGINT, SIGTERM,
	// SIGHUP, a quit dashboard): not errors, and not in the error rate or
	// the finished rate.
	CancelledAtEnd int64 `json:"cancelled_at_end"`
	// Abandoned counts the requests the probe closed on purpose, as users
	// who pressed stop (--cancel-after): not errors, not finished, and out
	// of every latency statistic.
	Abandoned int64 `json:"abandoned"`
	// Reconnects counts the requests the probe sent again on a fresh
	// connection because the server had closed the kept-alive one they went
	// out on, before answering (llama-server does after every stream); they
	// are not errors. Backoffs counts the pauses closed-loop streams took
	// after connection errors or a Retry-After. Both from the probe's
	// latest sample.
	Reconnects int64 `json:"reconnects"`
	Backoffs   int64 `json:"backoffs"`
	// HTTP2 sums up the HTTP/2 streams and connections: absent over
	// HTTP/1.1.
	HTTP2  *HTTP2 `json:"http2,omitempty"`
	Warmup int64  `json:"warmup"` // warm-up requests, kept out of everything else
	// TokensOut counts the output tokens of every request, failed ones too.
	TokensOut int64                   `json:"tokens_out"`
	ByOutcome map[event.Outcome]int64 `json:"by_outcome"` // errors only
	ByStatus  map[int]int64           `json:"by_status"`  // errors that carried an HTTP status
	Flags     map[event.Flag]int64    `json:"flags"`
	// TopErrors are the most frequent ways requests failed, most first.
	TopErrors []ErrorCount  `json:"top_errors"`
	Duration  time.Duration `json:"-"`         // first intended send → last completion (the cancellations, when none finished)
	ReqPerSec float64       `json:"req_per_s"` // requests finished (ok or errors) per second
	OKPerSec  float64       `json:"ok_per_s"`  // successful requests per second: the throughput
	TokPerSec float64       `json:"tok_per_s"` // output tokens per second over the run
	// Good and GoodPerSec count the requests that met every latency
	// objective of --slo, and their rate: the goodput. Absent without one.
	Good       *int64   `json:"good,omitempty"`
	GoodPerSec *float64 `json:"goodput_per_s,omitempty"`
	// Clamped counts values beyond ±10 min (the histograms' range)
	// recorded at the range's edge; negative values within it are kept.
	Clamped int64 `json:"clamped_values,omitempty"`
	// DroppedStages counts stage values dropped because too many distinct
	// stage names arrived.
	DroppedStages int64 `json:"dropped_stage_values,omitempty"`
}

// Finished counts the requests that ended by themselves, ok or not: all
// sent but those the run's end cancelled.
func (r Requests) Finished() int64 { return r.OK + r.Errors }

// ErrorRate is the share of the finished requests that failed (0..1), and
// false when none finished.
func (r Requests) ErrorRate() (float64, bool) {
	if r.Finished() == 0 {
		return 0, false
	}
	return float64(r.Errors) / float64(r.Finished()), true
}

// ErrorCount is how many failed requests ended with one outcome and message.
type ErrorCount struct {
	Outcome event.Outcome `json:"outcome"`
	Message string        `json:"message"`
	Count   int64         `json:"count"`
}

// maxTopErrors is how many error messages a summary lists.
const maxTopErrors = 5

func topErrors(m map[errorKey]int64) []ErrorCount {
	out := make([]ErrorCount, 0, len(m))
	for k, n := range m {
		out = append(out, ErrorCount{Outcome: k.outcome, Message: k.message, Count: n})
	}
	slices.SortFunc(out, func(a, b ErrorCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Message, b.Message))
	})
	return out[:min(len(out), maxTopErrors)]
}

// Breakdown summarises the TTFT breakdown over the requests that had one.
type Breakdown struct {
	Requests int64                          `json:"requests"` // successful requests with a breakdown
	Stages   map[event.Stage]BreakdownStage `json:"stages"`   // per breakdown stage
	// UnattributedShare is Σ unattributed / Σ TTFT over those requests (0..1).
	UnattributedShare float64 `json:"unattributed_share"`
}

// BreakdownStage is one breakdown stage over the run.
type BreakdownStage struct {
	Stats
	// Share is this stage's total over the TTFT total of the requests with a
	// breakdown (0..1).
	Share float64 `json:"share"`
	// Provenance lists every provenance seen for this stage, most direct first.
	Provenance []event.Provenance `json:"provenance"`
	// Mix counts the stage's values by provenance; Mix.Main() is what a
	// legend or table marks (estimated, or mixed), not any one request's.
	Mix ProvenanceMix `json:"provenance_count"`
}

// Snapshot computes the statistics with windows ending at now.
func (a *Aggregator) Snapshot(now time.Time) Snapshot {
	s := Snapshot{
		Now:       now,
		Start:     a.reqStart,
		Requests:  a.requests(),
		Breakdown: a.breakdownStats(),
		Server:    a.server.stats(now),
		Markers:   a.markers.stats(),
		TTFTBasis: a.basis(),
	}
	if a.reasoned {
		c := a.reasoning.counts
		s.Reasoning = &c
	}
	begin := a.reqStart
	if a.session != nil && !a.session.Time.IsZero() {
		begin = a.session.Time
	}
	if !begin.IsZero() && now.After(begin) {
		s.Elapsed = now.Sub(begin)
	}
	if a.session != nil {
		h := *a.session
		s.Session = &h
	}
	if a.probe != nil {
		p := *a.probe
		s.Probe = &p
	}
	s.LengthCounts = a.lengths.counts()
	s.Turns = a.turns.summary()
	s.Abandoned = a.abandon.summary()
	s.Unrecorded = a.unrec
	s.Unexported = a.unexp
	if len(a.lost) > 0 {
		s.Lost = copyMap(a.lost)
	}
	if a.gpu != nil {
		g := *a.gpu
		s.GPU = &g
	}
	for w := Window(0); w < NumWindows; w++ {
		s.Windows[w] = a.window(w, now)
	}
	s.Host = a.host.stats()
	s.Markers.Stalls = a.stalls.totals()
	s.Verdict = a.verdict(s.Windows[WinRun], s.Elapsed)
	s.Insights = a.insights(&s)
	s.Objectives = a.derive.objectives
	if a.sample != nil {
		s.Sample = a.sample.sample(now)
	}
	s.Ended = a.ended
	return s
}

// Summary returns the whole run's statistics: Final's.
func (a *Aggregator) Summary() Summary {
	return a.Final().Summary()
}

// Final is the snapshot of a finished run, with the windows ending at the
// latest event seen. The run is over, so its stalls still pending and its
// last error-burst period, cut short, are judged now (once: a second call
// adds nothing).
func (a *Aggregator) Final() Snapshot {
	a.finish()
	s := a.Snapshot(a.latest)
	s.ByLength = a.lengths.summary()
	return s
}

// Counts returns the run's request counters so far, as the snapshot's
// Requests has them, without taking a snapshot: sent (ok, errors and
// cancelled at the end; warm-up excluded), errors, and warm-up requests.
func (a *Aggregator) Counts() (sent, errors, warmup int64) {
	return a.counts.sent, a.counts.errors, a.counts.warmup
}

// Latest returns the latest event timestamp seen (the zero time before any).
func (a *Aggregator) Latest() time.Time { return a.latest }

func (a *Aggregator) requests() Requests {
	c := &a.counts
	r := Requests{
		Sent: c.sent, OK: c.ok, Errors: c.errors, CancelledAtEnd: c.runEnded, Abandoned: c.abandoned, Warmup: c.warmup, TokensOut: c.tokens,
		ByOutcome:     copyMap(c.byOutcome),
		ByStatus:      copyMap(c.byStatus),
		Flags:         copyMap(c.flags),
		TopErrors:     topErrors(c.messages),
		Clamped:       a.clamped,
		DroppedStages: a.droppedStage,
	}
	if a.probe != nil {
		r.Reconnects, r.Backoffs = a.probe.Reconnects, a.probe.Backoffs
	}
	r.HTTP2 = a.h2.summary(a.probe)
	end := a.reqEnd
	if end.IsZero() {
		// No request finished: the run lasted until it cancelled them,
		// not no time at all.
		end = a.cutEnd
	}
	if end.After(a.reqStart) && !a.reqStart.IsZero() {
		r.Duration = end.Sub(a.reqStart)
		r.ReqPerSec = float64(r.Finished()) / r.Duration.Seconds()
		r.OKPerSec = float64(c.ok) / r.Duration.Seconds()
		r.TokPerSec = float64(c.tokens) / r.Duration.Seconds()
	}
	if a.limits.set {
		good, rate := c.good, 0.0
		if r.Duration > 0 {
			rate = float64(good) / r.Duration.Seconds()
		}
		r.Good, r.GoodPerSec = &good, &rate
	}
	return r
}

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (a *Aggregator) breakdownStats() Breakdown {
	b := Breakdown{Requests: a.bdRequests, Stages: make(map[event.Stage]BreakdownStage, len(a.breakdown))}
	for name, st := range a.breakdown {
		bs := BreakdownStage{Stats: a.mg.whole(st.m), Provenance: provenances(st.prov), Mix: st.mix}
		if a.bdTTFT > 0 {
			bs.Share = float64(st.m.runTally.sum) / float64(a.bdTTFT)
		}
		b.Stages[name] = bs
	}
	if u, ok := b.Stages[event.StageUnattributed]; ok {
		b.UnattributedShare = u.Share
	}
	return b
}

// provenances lists the provenances seen, most direct first, unknown ones last.
func provenances(m map[event.Provenance]int64) []event.Provenance {
	out := make([]event.Provenance, 0, len(m))
	for _, p := range []event.Provenance{event.Measured, event.ServerReported, event.Estimated} {
		if m[p] > 0 {
			out = append(out, p)
		}
	}
	for _, p := range sortedKeys(m) {
		if p != event.Measured && p != event.ServerReported && p != event.Estimated {
			out = append(out, p)
		}
	}
	return out
}

// bounds returns the epochs window w covers at now, whether they are fine
// (1 s) or coarse (10 s) slots, and the time the first one starts.
func bounds(w Window, now time.Time) (fine bool, from, to int64, start time.Time) {
	width, n := int64(coarseWidth), int64(slotsPer5m)
	switch w {
	case Win10s:
		fine, width, n = true, int64(fineWidth), fineSlots
	case Win1m:
		n = slotsPer1m
	case Win5m:
	default:
		return false, 0, 0, time.Time{}
	}
	to = epochOf(now, width)
	from = to - n + 1
	return fine, from, to, time.Unix(0, from*width)
}

func (a *Aggregator) window(w Window, now time.Time) WindowStats {
	ws := WindowStats{
		Window:       w,
		Basis:        a.basis(),
		TTFT:         a.mg.stats(a.ttft, w, now),
		TTFTAnswer:   a.mg.stats(a.reasoning.ttftAnswer, w, now),
		Thinking:     a.mg.stats(a.reasoning.thinking, w, now),
		TTST:         a.mg.stats(a.reasoning.ttst, w, now),
		ITL:          a.mg.stats(a.itl, w, now),
		TPOT:         a.mg.stats(a.tpot, w, now),
		E2E:          a.mg.stats(a.e2e, w, now),
		TokensPerSec: a.mg.stats(a.tokRate, w, now),
		SchedLag:     a.mg.stats(a.schedLag, w, now),
		Stages:       make(map[event.Stage]Stats, len(a.stages)),
		Breakdown:    make(map[event.Stage]Stats, len(a.breakdown)),

		BreakdownProvenance: make(map[event.Stage]ProvenanceMix, len(a.breakdown)),
	}
	for name, m := range a.stages {
		if st := a.mg.stats(m, w, now); st.Count > 0 {
			ws.Stages[name] = st
		}
	}
	for name, b := range a.breakdown {
		if st := a.mg.stats(b.m, w, now); st.Count > 0 {
			ws.Breakdown[name] = st
			if w == WinRun {
				ws.BreakdownProvenance[name] = b.mix
			} else {
				ws.BreakdownProvenance[name] = b.windows.window(w, now)
			}
		}
	}
	ws.Bands = a.bands.bands(w, now)
	if w == WinRun {
		c := &a.counts
		// Like the time slots, the run counts the requests that finished.
		ws.Sent, ws.OK, ws.Errors, ws.Tokens, ws.Good = c.ok+c.errors, c.ok, c.errors, c.tokens, c.good
		ws.PromptTokens, ws.CachedTokens = a.turns.prompt, a.turns.cached
		if !a.reqStart.IsZero() && now.After(a.reqStart) {
			ws.Span = now.Sub(a.reqStart)
		}
		ws.ServerStageMeans = stageMeansMS(a.server.stages)
		ws.Traffic = a.server.traffic.stats()
		if q := a.server.waiting; q.n > 0 {
			ws.QueueDepthMean, ws.HasQueueDepth = q.sum/float64(q.n), true
		}
	} else {
		fine, from, to, start := bounds(w, now)
		cr, sr := a.coarseCounts, a.server.coarse
		if fine {
			cr, sr = a.fineCounts, a.server.fine
		}
		cr.each(from, to, func(c *counts) {
			ws.Sent += c.sent
			ws.OK += c.ok
			ws.Errors += c.errors
			ws.Tokens += c.tokens
			ws.Good += c.good
			ws.PromptTokens += c.prompt
			ws.CachedTokens += c.cached
		})
		if a.reqStart.After(start) {
			start = a.reqStart
		}
		if now.After(start) && !a.reqStart.IsZero() {
			ws.Span = now.Sub(start)
		}
		ws.ServerStageMeans, ws.QueueDepthMean, ws.HasQueueDepth = windowServer(sr, from, to)
		ws.Traffic = windowTraffic(sr, from, to)
	}
	ws.Traffic.Spans = a.userSpans(w, now)
	if ws.PromptTokens > 0 {
		ws.CacheHitRate = float64(ws.CachedTokens) / float64(ws.PromptTokens)
	}
	if ws.Span > 0 {
		ws.ReqPerSec = float64(ws.Sent) / ws.Span.Seconds()
		ws.TokPerSec = float64(ws.Tokens) / ws.Span.Seconds()
		ws.GoodPerSec = float64(ws.Good) / ws.Span.Seconds()
	}
	return ws
}

// Summary is the whole run, for the final report. It is a plain value.
// Latency fields follow the package's definitions (TTFT, ITL, TPOT, E2E: see
// the package documentation); they are in milliseconds, TokensPerSec in
// tokens per second per request.
//
// Summary is also the JSON shape of a report (WriteJSON): latencies are
// milliseconds as floats, rates per second.
type Summary struct {
	Session  *event.Session `json:"session,omitempty"`
	Start    time.Time      `json:"start,omitzero"` // first intended send
	End      time.Time      `json:"end,omitzero"`   // last completion
	Duration time.Duration  `json:"-"`              // in requests.duration_s
	Requests Requests       `json:"requests"`

	TTFT Stats `json:"ttft"`
	// TTFTAnswer is to the first answer token: after a reasoning model's
	// thinking, else the same as ttft. TTFTBasis says which of the two the
	// TTFT bar, the goodput and --slo's ttft objectives use.
	TTFTAnswer Stats     `json:"ttft_answer"`
	TTFTBasis  TTFTBasis `json:"ttft_basis"`
	// Thinking is a reasoning model's first token → first answer token,
	// and Reasoning its token counts: absent when no request reasoned.
	Thinking     *Stats                `json:"thinking,omitempty"`
	Reasoning    *Reasoning            `json:"reasoning,omitempty"`
	TTST         Stats                 `json:"ttst"` // time to the second token
	ITL          Stats                 `json:"itl"`
	TPOT         Stats                 `json:"tpot"`
	E2E          Stats                 `json:"e2e"`
	TokensPerSec Stats                 `json:"tok_per_s_per_request"` // each request's output tokens over its E2E
	SchedLag     Stats                 `json:"sched_lag"`             // how late the open loop sent, every request
	Verdict      ProbeVerdict          `json:"probe_verdict"`         // whether latscope kept pace
	ByLength     *ByLength             `json:"by_length,omitempty"`   // the successful requests by prompt and output length
	Turns        *Turns                `json:"turns,omitempty"`       // the successful requests by conversation turn and cached share
	Abandoned    *Abandoned            `json:"abandoned,omitempty"`   // the requests the probe abandoned on purpose
	Stages       map[event.Stage]Stats `json:"stages"`                // client stages
	Breakdown    Breakdown             `json:"breakdown"`
	Server       ServerStats           `json:"server"`
	// Traffic is the whole run's view of the server's own traffic, in a
	// session that watches it (latscope watch); nil otherwise.
	Traffic *Traffic         `json:"traffic,omitempty"`
	GPU     *event.GPUSample `json:"gpu"`
	// Host is the client host's CPU pressure over the run (absent without
	// host samples): see HostStats.
	Host     *HostStats     `json:"host,omitempty"`
	Markers  Markers        `json:"markers"`
	Insights []event.Marker `json:"insights"`
	// Lost counts events that never reached the aggregator, by consumer.
	Lost map[string]int64 `json:"lost,omitempty"`
	// Unrecorded counts events missing from the recording: a live run's
	// figures have them, a replay of the file does not.
	Unrecorded *Unrecorded `json:"unrecorded,omitempty"`
	// Unexported counts the spans that never reached the OTLP collector
	// (Events counts spans), and the first reason.
	Unexported *Unrecorded `json:"unexported,omitempty"`
	// DuplicatesIgnored counts the request events a replay or a report of a
	// recording left out because the file held the same request (its id)
	// again: each request is counted once. The reader sets it; the
	// aggregator never sees the copies.
	DuplicatesIgnored int64 `json:"duplicates_ignored,omitempty"`
}

// Unrecorded counts the events a recording could not write, from the
// recorder's Loss records, and the first reason given.
type Unrecorded struct {
	Events int64  `json:"events"`
	Reason string `json:"reason,omitempty"`
}

// Summary turns a snapshot into the whole-run summary.
func (s Snapshot) Summary() Summary {
	run := s.Windows[WinRun]
	out := Summary{
		Session:      s.Session,
		Lost:         s.Lost,
		Unrecorded:   unrecorded(s.Unrecorded),
		Unexported:   unrecorded(s.Unexported),
		Start:        s.Start,
		Duration:     s.Requests.Duration,
		Requests:     s.Requests,
		TTFT:         run.TTFT,
		TTFTAnswer:   run.TTFTAnswer,
		TTFTBasis:    s.TTFTBasis,
		Reasoning:    s.Reasoning,
		TTST:         run.TTST,
		ITL:          run.ITL,
		TPOT:         run.TPOT,
		E2E:          run.E2E,
		TokensPerSec: run.TokensPerSec,
		SchedLag:     run.SchedLag,
		Verdict:      s.Verdict,
		ByLength:     s.ByLength,
		Turns:        s.Turns,
		Abandoned:    s.Abandoned,
		Stages:       run.Stages,
		Breakdown:    s.Breakdown,
		Server:       s.Server,
		GPU:          s.GPU,
		Markers:      s.Markers,
		Insights:     s.Insights,
	}
	if !s.Start.IsZero() {
		out.End = s.Start.Add(s.Requests.Duration)
	}
	if s.Session != nil && s.Session.Load.Watches() {
		tr := run.Traffic
		out.Traffic = &tr
	}
	if s.Host.Latest != nil {
		h := s.Host
		out.Host = &h
	}
	if s.Reasoning != nil {
		th := run.Thinking
		out.Thinking = &th
	}
	return out
}

// MemoryBytes estimates the memory held by the histograms (the sparse slot
// and whole-run histograms plus the dense scratch one used for merging).
func (a *Aggregator) MemoryBytes() int {
	n := a.mg.scratch.ByteSize()
	for _, m := range append([]*metric{a.ttft, a.itl, a.tpot, a.e2e, a.tokRate, a.schedLag}, a.reasoning.metrics()...) {
		n += m.memory()
	}
	for _, m := range a.stages {
		n += m.memory()
	}
	for _, b := range a.breakdown {
		n += b.m.memory()
	}
	return n + a.users.memory()
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// unrecorded is nil when the recording missed nothing, so the summary's
// JSON has the key only when there is something to say.
func unrecorded(u Unrecorded) *Unrecorded {
	if u.Events == 0 && u.Reason == "" {
		return nil
	}
	return &u
}
