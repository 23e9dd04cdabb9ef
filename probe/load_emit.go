package probe

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// emitItem is one thing for the emitter: a finished request (with the
// prompt length it was built for), a marker, a probe sample, a request
// going out, or a stretch in which the probe's goroutines ran late.
type emitItem struct {
	rec    *event.Request
	target int
	marker *event.Marker
	probe  *event.ProbeSample
	sent   sentNote
	late   *event.Stretch
}

// sentNote says that a request went out at `at`; timed says it had a
// scheduled time (open loop), which it missed by lag.
type sentNote struct {
	id    string
	at    time.Time
	lag   time.Duration
	timed bool
}

// Bounds on the raw evidence one probe sample carries: the latest are kept.
const (
	maxSendLags = 4096
	maxLate     = 4096
)

// emitter is the one goroutine that calls the user's emit function. It owns
// the run's counters and the raw evidence gathered for the next probe
// sample, so neither needs a lock. It judges nothing: the aggregator
// derives the stalls, the scheduling lag's quantiles and the probe's limits
// from what the samples carry (event.ProbeRawV1).
type emitter struct {
	stats   RunStats
	prompts *PromptSource
	open    bool

	// Since the last probe sample: the requests sent and not yet finished
	// (by id), the sends' lateness, and the stretches the probe ran late.
	pending  map[string]time.Time
	sendLags []sendLag
	late     []event.Stretch

	firstStart, lastStart time.Time
	starts                int
}

type sendLag struct {
	at  time.Time
	lag time.Duration
}

func newEmitter(prompts *PromptSource, openLoop bool) *emitter {
	return &emitter{
		open:    openLoop,
		stats:   RunStats{ByOutcome: map[event.Outcome]int{}},
		prompts: prompts,
		pending: map[string]time.Time{},
	}
}

// loop emits everything from in until it is closed.
func (e *emitter) loop(in <-chan emitItem, emit func(event.Event)) {
	for it := range in {
		switch {
		case it.marker != nil:
			e.marker(*it.marker, emit)
		case it.probe != nil:
			emit(event.NewProbe(e.withEvidence(it.probe)))
		case it.sent.id != "":
			e.sent(it.sent)
		case it.late != nil:
			e.late = appendLatest(e.late, *it.late, maxLate)
		case it.rec != nil:
			e.request(it, emit)
		}
	}
	e.finish()
}

// sent notes a request going out, for the next probe sample.
func (e *emitter) sent(n sentNote) {
	e.pending[n.id] = n.at
	if n.timed {
		e.sendLags = appendLatest(e.sendLags, sendLag{n.at, n.lag}, maxSendLags)
	}
}

// withEvidence fills p with the raw evidence gathered since the previous
// sample, and starts gathering afresh. Its Sent are the requests still in
// flight: their records come after p, as the detector that waits for them
// needs.
func (e *emitter) withEvidence(p *event.ProbeSample) *event.ProbeSample {
	p.Raw = event.ProbeRawV1
	p.Sent = make([]event.Sent, 0, len(e.pending))
	for id, at := range e.pending {
		p.Sent = append(p.Sent, event.Sent{ID: id, At: at})
	}
	clear(e.pending)
	slices.SortFunc(p.Sent, func(a, b event.Sent) int { return cmp.Or(a.At.Compare(b.At), strings.Compare(a.ID, b.ID)) })
	if lags := latestOf(e.sendLags, maxSendLags); len(lags) > 0 {
		p.SendLags = make([]event.SendLag, len(lags))
		for i, l := range lags {
			p.SendLags[i] = event.SendLag{At: l.at.Round(0).Sub(p.Time.Round(0)), Lag: l.lag} // wall clock, as a recording has it
		}
		e.sendLags = e.sendLags[:0]
	}
	p.Late, e.late = latestOf(e.late, maxLate), nil
	if len(p.Sent) == 0 {
		p.Sent = nil
	}
	return p
}

// appendLatest appends v to list, which latestOf then reads. The list
// grows to twice limit before its oldest are dropped, all but limit-1 at
// once: dropping one per append shifts the whole list each time, and at
// thousands of streams running late together that was a tenth of the
// probe's CPU.
func appendLatest[T any](list []T, v T, limit int) []T {
	if len(list) >= 2*limit {
		list = list[:copy(list, list[len(list)-limit+1:])]
	}
	return append(list, v)
}

// latestOf is the newest limit of a list appendLatest kept.
func latestOf[T any](list []T, limit int) []T {
	return list[max(len(list)-limit, 0):]
}

func (e *emitter) request(it emitItem, emit func(event.Event)) {
	rec := it.rec
	delete(e.pending, rec.ID)
	e.count(rec)
	if rec.OK() && !rec.HasFlag(event.FlagMissingUsage) {
		e.prompts.Observe(it.target, rec.PromptTokens)
	}
	emit(event.NewRequest(rec))
}

func (e *emitter) count(rec *event.Request) {
	if !rec.Start.IsZero() {
		if e.starts == 0 || rec.Start.Before(e.firstStart) {
			e.firstStart = rec.Start
		}
		if e.starts == 0 || rec.Start.After(e.lastStart) {
			e.lastStart = rec.Start
		}
		e.starts++
	}
	if rec.Warmup {
		e.stats.WarmupSent++
		if rec.Failed() {
			e.stats.WarmupErrors++
		}
		return
	}
	e.stats.Sent++
	e.stats.ByOutcome[rec.Outcome]++
	switch {
	case rec.OK():
		e.stats.OK++
	case rec.RunEnded:
		e.stats.RunEnded++
	case rec.Abandoned():
		e.stats.Abandoned++
	default:
		e.stats.Errors++
	}
	if e.open {
		e.stats.SchedLagMax = max(e.stats.SchedLagMax, rec.SchedLag)
	}
}

func (e *emitter) marker(m event.Marker, emit func(event.Event)) {
	if m.Kind == event.MarkerProbeLimit {
		e.stats.ProbeLimits++
	}
	emit(event.NewMarker(&m))
}

func (e *emitter) finish() {
	if span := e.lastStart.Sub(e.firstStart); e.starts > 1 && span > 0 {
		e.stats.SendRate = float64(e.starts-1) / span.Seconds()
	}
}
