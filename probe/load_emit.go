package probe

import (
	"slices"
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
	late   *interval
}

// sentNote says that a request went out: the stall detector waits for its
// record before deciding the causes of the pauses it was there for.
type sentNote struct {
	id string
	at time.Time
}

// emitter is the one goroutine that calls the user's emit function. It owns
// the run's counters and the stall detector, so neither needs a lock.
type emitter struct {
	stats   RunStats
	stall   *StallDetector
	prompts *PromptSource
	open    bool

	firstStart, lastStart time.Time
	starts                int
}

func newEmitter(stall StallConfig, prompts *PromptSource, openLoop bool) *emitter {
	return &emitter{
		open:    openLoop,
		stats:   RunStats{ByOutcome: map[event.Outcome]int{}},
		stall:   NewStallDetector(stall),
		prompts: prompts,
	}
}

// loop emits everything from in until it is closed, then the stalls still
// pending. A ticker moves the stall detector's clock so a stall is reported
// even when no request finishes for a while.
func (e *emitter) loop(in <-chan emitItem, emit func(event.Event)) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-in:
			if !ok {
				e.markers(e.stall.Flush(), emit)
				e.finish()
				return
			}
			if it.marker != nil {
				e.marker(*it.marker, emit)
				continue
			}
			switch {
			case it.probe != nil:
				emit(event.NewProbe(it.probe))
			case it.sent.id != "":
				e.stall.Sent(it.sent.id, it.sent.at)
			case it.late != nil:
				e.stall.Starved(it.late.from, it.late.to)
			case it.rec != nil:
				e.request(it, emit)
			}
		case now := <-tick.C:
			e.markers(e.stall.Advance(now), emit)
		}
	}
}

func (e *emitter) request(it emitItem, emit func(event.Event)) {
	rec := it.rec
	e.count(rec)
	if rec.OK() && !rec.HasFlag(event.FlagMissingUsage) {
		e.prompts.Observe(it.target, rec.PromptTokens)
	}
	stalls := e.stall.Add(rec)
	e.checkNagle(rec)
	emit(event.NewRequest(rec))
	e.markers(stalls, emit)
}

// checkNagle takes back a Nagle suspicion that rests on gaps other streams
// paused in too: a pause of the whole server is not this connection's
// delayed ACK.
func (e *emitter) checkNagle(rec *event.Request) {
	if !rec.HasFlag(event.FlagNagleSuspect) {
		return
	}
	id := streamID(rec)
	shared := func(from, to time.Duration) bool {
		return e.stall.SharedPause(id, rec.Start.Add(from), rec.Start.Add(to))
	}
	if !nagleSignature(rec.Chunks, shared) {
		rec.Flags = slices.DeleteFunc(rec.Flags, func(f event.Flag) bool { return f == event.FlagNagleSuspect })
	}
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
		if !rec.OK() {
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
	default:
		e.stats.Errors++
	}
	if e.open {
		e.stats.SchedLagMax = max(e.stats.SchedLagMax, rec.SchedLag)
	}
}

func (e *emitter) markers(ms []event.Marker, emit func(event.Event)) {
	for _, m := range ms {
		e.marker(m, emit)
	}
}

func (e *emitter) marker(m event.Marker, emit func(event.Event)) {
	switch m.Kind {
	case event.MarkerStall:
		e.stats.Stalls++
	case event.MarkerProbeLimit:
		e.stats.ProbeLimits++
	}
	emit(event.NewMarker(&m))
}

func (e *emitter) finish() {
	if span := e.lastStart.Sub(e.firstStart); e.starts > 1 && span > 0 {
		e.stats.SendRate = float64(e.starts-1) / span.Seconds()
	}
}
