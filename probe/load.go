package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// DefaultMaxInFlight bounds the open loop's concurrent requests. Past it the
// probe sends late (recorded as sched lag) and says it cannot keep up.
const DefaultMaxInFlight = 10000

// LoadConfig says how much load to send and when.
type LoadConfig struct {
	// Concurrency is the number of closed-loop workers, each waiting for its
	// own response before sending again (default 1). In open loop it is the
	// number of workers started up front; more start as needed.
	Concurrency int
	// Rate > 0 selects open loop: requests are sent at Rate per second on
	// the Arrival schedule whatever the responses do, and latency counts
	// from the scheduled time.
	Rate       float64
	Arrival    string  // poisson (default), constant or gamma
	Burstiness float64 // gamma shape: 1 = poisson, < 1 burstier, > 1 smoother
	// Pacer, when set, replaces the schedule built from Rate and Arrival
	// (and selects open loop).
	Pacer Pacer
	// Trace, when set, is replayed in open loop: each request at its time
	// in the trace (TraceSpeed times as fast; 0 means 1), with the trace's
	// prompt and output lengths. The run ends after its last request.
	Trace      *Trace
	TraceSpeed float64

	// The run stops at Duration or after Warmup+Requests requests,
	// whichever comes first, or when the context passed to Run ends. Zero
	// means no limit of that kind.
	Duration time.Duration
	Requests int
	// Warmup requests are sent first, marked Warmup and kept out of the
	// statistics; they are not part of Requests.
	Warmup int
	// Drain is how long requests still in flight at Duration may continue
	// before they are cancelled (default 0: cancelled at once). They are
	// recorded either way.
	Drain time.Duration

	// Steps, when set, make a stepped closed loop: the number of streams
	// follows the steps (each step's Concurrency for its Duration), and
	// RepeatSteps starts them over at the end. Concurrency is then ignored.
	Steps       []LoadStep
	RepeatSteps bool

	// Conversation, when its Turns are set, makes the load users in chat
	// sessions (see Conversation), in the closed loop or the open.
	Conversation Conversation
	// Cancel abandons a share of the requests on purpose (see
	// CancelPolicy); their records end abandoned.
	Cancel CancelPolicy

	// SlotWatch, when set, measures for each abandoned request how long
	// the server took to free its batch slot (collector.SlotWatch); the
	// record waits for it.
	SlotWatch SlotWatcher

	// MaxInFlight bounds open-loop requests in flight (default 10000).
	MaxInFlight int
	Seed        int64  // the schedule's seed (prompts have their own)
	Shard       Shard  // this agent's share of a fleet's load (shard.go)
	RunID       string // used in request ids; default 8 random hex digits
	// StartAt, when set and still ahead, is when the run begins: the
	// shards of a fleet started at one time send one schedule together.
	StartAt time.Time

	// SelfInterval is how often the probe samples itself (default 1 s):
	// each sample carries what it measured since the previous one (the
	// sends' lateness, the stretches it ran late, the requests still in
	// flight), from which the aggregator judges it. The aggregator's stall
	// detector waits 5 s for a pause's evidence, so an interval longer
	// than that delays the stall markers.
	SelfInterval time.Duration
	// LagSample is how often the probe checks that its own goroutines run
	// on time (default 5 ms; negative: never). A late check is the evidence
	// that a pause its streams saw was its own.
	LagSample time.Duration
	// LagClock is the clock that check reads (nil: time.Now); a test holds
	// the probe up by making it block, as a starved machine holds up every
	// goroutine.
	LagClock func() time.Time
}

// SlotWatcher measures the release of an abandoned request's batch slot:
// Run scrapes until its context ends; Watch waits for the release of the
// slot of the request whose stream closed at closed.
type SlotWatcher interface {
	Run(ctx context.Context)
	Watch(ctx context.Context, closed time.Time) (after time.Duration, source, note string)
}

// RunStats sums up a run. Warmup requests are counted apart; for the rest
// Sent == OK + Errors + RunEnded always holds, also after Ctrl-C, because
// every request sent yields exactly one record.
type RunStats struct {
	Sent, OK, Errors int
	// RunEnded counts the requests the run's end cancelled (its Duration
	// and Drain over, or its caller cancelling ctx: a Ctrl-C, a quit):
	// neither ok nor errors.
	RunEnded int
	// Abandoned counts the requests the probe abandoned on purpose
	// (LoadConfig.Cancel): neither ok nor errors.
	Abandoned    int
	ByOutcome    map[event.Outcome]int // every request's outcome, RunEnded ones as cancelled
	WarmupSent   int
	WarmupErrors int

	InFlightPeak int
	// SendRate is the achieved rate: requests started per second between
	// the first and the last start (all requests, warmup included).
	SendRate float64
	// SchedLagMax is the latest an open-loop request was sent; the
	// percentiles are the aggregator's.
	SchedLagMax time.Duration

	// ProbeLimits counts the probe_limit markers the probe emitted: the
	// open loop's in-flight cap reached. The others (its lag, its CPU) and
	// the stall markers are the aggregator's, from its raw samples.
	ProbeLimits int
	Backoffs    int  // pauses closed-loop workers took (see BackoffFirst)
	Reconnects  int  // requests sent again after a stale keep-alive connection
	Interrupted bool // the context ended the run (Ctrl-C)
	Elapsed     time.Duration
}

// Runner sends a run's requests through a Doer and reports every record.
type Runner struct {
	doer    Doer
	cfg     LoadConfig
	prompts *PromptSource
	pacer   Pacer // nil in closed loop
	total   uint64
	runID   string
	self    *selfMonitor
	gate    *markerGate
	level   *level    // the closed loop's current concurrency (stepped load changes it)
	lag     *lagWatch // the scheduling-lag watch's news from the requests (nil: no watch)

	// pause waits between a worker's requests (sleepCtx; tests replace it).
	pause func(ctx context.Context, d time.Duration) bool

	started    atomic.Bool
	inFlight   atomic.Int64
	peak       atomic.Int64
	backoffs   atomic.Int64
	sessions   atomic.Int64 // conversation sessions begun
	chats      chatPool     // the open loop's sessions between turns
	runCtx     context.Context
	releases   sync.WaitGroup // abandoned requests awaiting their slot's release
	reconnects atomic.Int64
	stats      RunStats // set when Run returns
}

// NewRunner checks cfg and returns a Runner that sends prompts from prompts
// through d.
func NewRunner(d Doer, cfg LoadConfig, prompts *PromptSource) (*Runner, error) {
	switch {
	case d == nil:
		return nil, errors.New("no doer")
	case prompts == nil:
		return nil, errors.New("no prompt source")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runner{doer: d, cfg: cfg.withDefaults(), prompts: prompts, pacer: cfg.Pacer, pause: sleepCtx}
	r.level = newLevel(r.cfg.Concurrency)
	if err := r.buildPacer(); err != nil {
		return nil, err
	}
	if err := r.applyShard(); err != nil {
		return nil, err
	}
	if r.cfg.Requests > 0 {
		r.total = uint64(r.cfg.Requests) + uint64(r.cfg.Warmup)
	}
	r.runID = cfg.RunID
	if r.runID == "" {
		r.runID = randomHex(4)
	}
	r.self = newSelfMonitor()
	r.gate = newMarkerGate(maxInFlightCooldown)
	if r.cfg.LagSample > 0 {
		r.lag = newLagWatch()
	}
	return r, nil
}

// validate reports the first figure of c out of range, or the first pair
// of schedules given together.
func (c LoadConfig) validate() error {
	switch {
	case c.Concurrency < 0:
		return fmt.Errorf("concurrency %d: want 0 or more", c.Concurrency)
	case !(c.Rate >= 0) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("rate %v: want a number of requests per second, or 0 for closed loop", c.Rate)
	case c.Requests < 0 || c.Warmup < 0:
		return fmt.Errorf("requests %d, warmup %d: want 0 or more", c.Requests, c.Warmup)
	case c.Duration < 0 || c.Drain < 0:
		return fmt.Errorf("duration %s, drain %s: want 0 or more", c.Duration, c.Drain)
	case c.MaxInFlight < 0:
		return fmt.Errorf("max in flight %d: want 0 or more", c.MaxInFlight)
	}
	return c.validateSchedule()
}

// validateSchedule refuses steps, a trace and a rate given together, and
// steps that send nothing.
func (c LoadConfig) validateSchedule() error {
	openLoop := c.Rate > 0 || c.Pacer != nil
	switch {
	case len(c.Steps) > 0 && openLoop:
		return errors.New("load steps are for the closed loop: give steps or a rate, not both")
	case c.Trace != nil && (openLoop || len(c.Steps) > 0):
		return errors.New("a trace is its own schedule: give a trace, or a rate or steps, not both")
	case c.Conversation.Turns > 0 && c.Trace != nil:
		return errors.New("a trace is its own schedule: give a trace or conversations, not both")
	case c.Conversation.Turns < 0 || c.Conversation.Think < 0:
		return fmt.Errorf("conversation of %d turns, think %s: want 0 or more of each", c.Conversation.Turns, c.Conversation.Think)
	}
	for i, st := range c.Steps {
		if st.Concurrency < 1 || st.Duration <= 0 {
			return fmt.Errorf("load step %d: %d streams for %s: want 1 or more streams for a positive time", i+1, st.Concurrency, st.Duration)
		}
	}
	return nil
}

// withDefaults fills in what c leaves zero; stepped load starts as many
// workers as its largest step needs.
func (c LoadConfig) withDefaults() LoadConfig {
	if len(c.Steps) > 0 {
		c.Concurrency = maxSteps(c.Steps)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.SelfInterval <= 0 {
		c.SelfInterval = time.Second
	}
	if c.LagSample == 0 {
		c.LagSample = 5 * time.Millisecond
	}
	if c.LagClock == nil {
		c.LagClock = time.Now
	}
	return c
}

// buildPacer makes the open loop's schedule: the trace's, else one from
// Rate and Arrival; a Pacer given in the config stays.
func (r *Runner) buildPacer() error {
	cfg := r.cfg
	if cfg.Trace != nil {
		speed := cfg.TraceSpeed
		if speed == 0 {
			speed = 1
		}
		p, err := NewTracePacer(cfg.Trace, speed)
		if err != nil {
			return err
		}
		r.pacer = p
	}
	if r.pacer == nil && cfg.Rate > 0 {
		p, err := NewPacer(cfg.Arrival, cfg.Rate, cfg.Burstiness, cfg.Seed)
		if err != nil {
			return err
		}
		r.pacer = p
	}
	return nil
}

// RunID returns the id that prefixes every request id of this run.
func (r *Runner) RunID() string { return r.runID }

// InFlight returns the number of requests in flight now.
func (r *Runner) InFlight() int { return int(r.inFlight.Load()) }

// SelfStats returns the probe's CPU use and requests in flight.
func (r *Runner) SelfStats() SelfStats {
	s := r.self.stats()
	s.InFlight = r.InFlight()
	s.MaxInFlight = r.level.get()
	if r.pacer != nil {
		s.MaxInFlight = r.cfg.MaxInFlight
	}
	return s
}

// Stats sums up the run; it is complete once Run has returned.
func (r *Runner) Stats() RunStats { return r.stats }

// Run sends the load and calls emit with every request record, its markers
// (load steps, the open loop's in-flight cap) and a probe sample every
// SelfInterval (in flight, CPU, and the raw evidence the aggregator judges
// it by: the first comes before any request): the Runner is a pipeline
// source. Calls to emit are
// serialised: they all come from one goroutine, one at a time, so emit needs
// no locking; it should return quickly, since a slow emit eventually holds
// up the workers. Run returns when every request has been recorded and every
// goroutine it started has stopped. A Runner runs once.
//
// Cancelling ctx stops the run: requests in flight are cancelled, recorded
// with outcome cancelled and marked RunEnded, as the run's own end
// (Duration and Drain over) marks them: whatever the cause (a signal, a
// quit dashboard, a sweep's step decided), they did not fail, the run
// stopped them. Run then returns nil, and Stats says Interrupted.
func (r *Runner) Run(ctx context.Context, emit func(event.Event)) error {
	if emit == nil {
		return errors.New("run: no emit function")
	}
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("run: a runner runs once")
	}
	r.waitForStart(ctx) // a Ctrl-C meanwhile ends the run below, at once
	began := time.Now()

	// reqCtx cancels requests in flight; sendCtx, its child, ends
	// dispatching. Both end on Ctrl-C; at Duration sending stops and, Drain
	// later, requests are cancelled with pipeline.ErrRunEnded as the cause,
	// which marks their records RunEnded. Cancellation reaches a child a
	// moment after its parent, so loops check both (see stopped).
	reqCtx, cancelRequests := context.WithCancelCause(ctx)
	defer cancelRequests(nil)
	sendCtx, stopSending := context.WithCancel(reqCtx)
	defer stopSending()
	endRun := func() { cancelRequests(pipeline.ErrRunEnded) }
	if d := r.cfg.Duration; d > 0 {
		stopTimer := time.AfterFunc(d, func() {
			stopSending()
			if r.cfg.Drain == 0 {
				endRun()
			}
		})
		defer stopTimer.Stop()
		if r.cfg.Drain > 0 {
			cancelTimer := time.AfterFunc(d+r.cfg.Drain, endRun)
			defer cancelTimer.Stop()
		}
	}

	// Finished requests wait here for the emitter. Few: each can hold a
	// whole stream's chunks (8,192 tokens are 128 KB), and behind the
	// emitter the pipeline bounds what waits by bytes.
	out := make(chan emitItem, 64)
	em := newEmitter(r.prompts, r.pacer != nil)
	emitted := make(chan struct{})
	go func() {
		defer close(emitted)
		em.loop(out, emit)
	}()
	stopWatching := r.watchSelf(out)
	r.runCtx = ctx
	stopSlots := r.watchSlots()

	if r.pacer != nil {
		r.openLoop(sendCtx, reqCtx, began, out)
	} else {
		r.closedLoop(sendCtx, reqCtx, out)
	}
	r.releases.Wait() // the abandoned requests' records
	stopSlots()
	// Every worker has returned and sent its last record. A last probe
	// sample carries the run's final counts (reconnects, back-offs).
	stopWatching()
	out <- emitItem{probe: r.probeSample(time.Now())}
	close(out)
	<-emitted

	st := em.stats
	st.InFlightPeak = int(r.peak.Load())
	st.Backoffs = int(r.backoffs.Load())
	st.Reconnects = int(r.reconnects.Load())
	st.Interrupted = ctx.Err() != nil
	st.Elapsed = time.Since(began)
	r.stats = st
	return nil
}

// closedLoop runs Concurrency workers, each sending its next request when
// its previous one has ended, after a pause if it must back off.
func (r *Runner) closedLoop(sendCtx, reqCtx context.Context, out chan<- emitItem) {
	var next atomic.Uint64
	var wg sync.WaitGroup
	if len(r.cfg.Steps) > 0 {
		// The first step begins before any worker starts, so none sends
		// above its level.
		if !r.beginStep(sendCtx, r.cfg.Steps[0], out) {
			return
		}
		wg.Go(func() { r.stepLoad(sendCtx, out) })
	}
	for w := range r.cfg.Concurrency {
		wg.Go(func() {
			bo := newBackoff(r.cfg.Seed, w)
			var wait time.Duration
			var c *chat
			for !stopped(sendCtx, reqCtx) && r.level.admit(sendCtx, w) {
				seq := next.Add(1) - 1
				if r.total > 0 && seq >= r.total {
					return
				}
				// The pause comes after claiming a request, so a run that
				// has sent all it should never waits for nothing.
				if wait > 0 {
					r.backoffs.Add(1)
					if !r.pause(sendCtx, wait) {
						return
					}
				}
				spec := r.spec(seq, w, time.Time{})
				if r.cfg.Conversation.Turns > 0 {
					c = r.chatFor(c)
					newTokens := spec.PromptTokens
					c.nextTurn(&spec)
					res := r.sendSpec(reqCtx, spec, out)
					c = r.afterTurn(sendCtx, c, spec, newTokens, res)
					wait = bo.pauseAfter(res.outcome, res.retryAfter)
					continue
				}
				res := r.sendSpec(reqCtx, spec, out)
				wait = bo.pauseAfter(res.outcome, res.retryAfter)
			}
		})
	}
	wg.Wait()
}

// chatFor returns the worker's session for its next turn: c, or a new
// session when c is nil or has sent all its turns.
func (r *Runner) chatFor(c *chat) *chat {
	if c != nil && c.turn < r.cfg.Conversation.Turns {
		return c
	}
	return &chat{id: fmt.Sprintf("%s-s%d", r.runID, r.sessions.Add(1))}
}

// afterTurn keeps the answer of a turn that came back (in full, or as far
// as the probe let it: abandoned) and waits the think time before the
// session's next turn; a turn that failed ends its session. It returns the
// session to go on with (nil: a new one).
func (r *Runner) afterTurn(sendCtx context.Context, c *chat, spec RequestSpec, newTokens int, res sendResult) *chat {
	if res.outcome != event.OutcomeOK && res.outcome != event.OutcomeAbandoned {
		return nil
	}
	c.answered(spec, newTokens, res.outputTokens, res.answer)
	if c.turn < r.cfg.Conversation.Turns && r.cfg.Conversation.Think > 0 {
		r.pause(sendCtx, r.cfg.Conversation.Think)
	}
	return c
}

// openTurn sends spec, scheduled by the open loop's tick t, as the next
// turn of a session ready for it (or a new session's first), and keeps the
// session for its next turn after the think time. A turn that failed ends
// its session, as in the closed loop.
func (r *Runner) openTurn(sendCtx, reqCtx context.Context, spec RequestSpec, t openTick, out chan<- emitItem) {
	c := r.chats.take(t.intended)
	if c == nil {
		c = r.chatFor(nil)
	}
	newTokens := spec.PromptTokens
	c.nextTurn(&spec)
	if !waitUntil(sendCtx, t.intended, t.spin) {
		return
	}
	res := r.sendSpec(reqCtx, spec, out)
	if (res.outcome != event.OutcomeOK && res.outcome != event.OutcomeAbandoned) || c.turn >= r.cfg.Conversation.Turns {
		return
	}
	c.answered(spec, newTokens, res.outputTokens, res.answer)
	r.chats.put(c, time.Now().Add(r.cfg.Conversation.Think))
}

// waitUntil waits for t, or returns false when ctx ends first. It sleeps
// until spin before t and spins (yielding) through the rest: once the
// process polls the network, Go's timers fire up to a millisecond late
// (the poller sleeps in whole milliseconds), which an open loop's send
// time should not be.
func waitUntil(ctx context.Context, t time.Time, spin time.Duration) bool {
	if sleepOnly.Load() {
		spin = 0
	}
	if d := time.Until(t) - spin; d > 0 && !sleepCtx(ctx, d) {
		return false
	}
	for time.Now().Before(t) {
		runtime.Gosched()
	}
	return ctx.Err() == nil
}

// sleepOnly makes waitUntil sleep the whole wait, without spinning: set by
// tests that run the Runner on a virtual clock (testing/synctest), where
// time stands still while a goroutine spins.
var sleepOnly atomic.Bool

// maxSpin is the longest an open-loop request spins before its time. At
// a high rate a request spins at most a quarter of the mean gap between
// requests, so the probe spends about a quarter of a core at most however
// high the rate; a burst in a slow schedule still spins in full.
const maxSpin = 1500 * time.Microsecond

// spinFor is how long a request spins when requests are due meanGap apart.
func spinFor(meanGap time.Duration) time.Duration { return min(maxSpin, meanGap/4) }

// dispatchLead is how long before its time an open-loop request is handed
// to a worker, which builds it and then waits for its time: neither the
// hand-over between goroutines nor building the prompt makes it late, nor
// a timer that fires a few milliseconds late on a busy machine.
const dispatchLead = 5 * time.Millisecond

// openTick is one scheduled request handed to an open-loop worker.
type openTick struct {
	seq      uint64
	intended time.Time
	spin     time.Duration // how long to spin before intended (see waitUntil)
}

// openLoop sends on the pacer's schedule. Like vegeta's attack loop, it
// starts another worker whenever all are busy, so slow responses never lower
// the sent rate; at MaxInFlight workers it waits for one to free up, sends
// late (the lateness is recorded) and says it cannot keep up.
func (r *Runner) openLoop(sendCtx, reqCtx context.Context, began time.Time, out chan<- emitItem) {
	ticks := make(chan openTick)
	var wg sync.WaitGroup
	workers := 0
	spawn := func() {
		w := workers
		workers++
		wg.Go(func() {
			for t := range ticks {
				// The tick comes early: build the request, then send it
				// at its time.
				spec := r.spec(t.seq, w, t.intended)
				if r.cfg.Conversation.Turns > 0 {
					r.openTurn(sendCtx, reqCtx, spec, t, out)
					continue
				}
				if waitUntil(sendCtx, t.intended, t.spin) {
					r.sendSpec(reqCtx, spec, out)
				}
			}
		})
	}
	defer func() {
		close(ticks)
		wg.Wait()
	}()
	for range min(r.cfg.Concurrency, r.cfg.MaxInFlight) {
		spawn()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	prevDue, meanGap := time.Duration(-1), 4*maxSpin
	for hits := uint64(0); r.total == 0 || hits < r.total; hits++ {
		elapsed := time.Since(began)
		wait, stop := r.pacer.Pace(elapsed, hits)
		if stop {
			return
		}
		due := elapsed + wait
		if prevDue >= 0 {
			meanGap += (due - prevDue - meanGap) / 16
		}
		prevDue = due
		t := openTick{seq: hits, intended: began.Add(due), spin: spinFor(meanGap)}
		if wait > dispatchLead {
			timer.Reset(wait - dispatchLead)
			select {
			case <-timer.C:
			case <-sendCtx.Done():
				return
			}
		}
		if stopped(sendCtx, reqCtx) {
			return
		}
		select {
		case ticks <- t:
			continue
		case <-sendCtx.Done():
			return
		default: // every worker is busy
		}
		if workers < r.cfg.MaxInFlight {
			spawn()
		} else if now := time.Now(); r.gate.allow(limitMaxInFlight, now) {
			// Every worker is sending or about to (a tick comes early).
			m := maxInFlightMarker(now, workers, r.cfg.Rate)
			out <- emitItem{marker: &m}
		}
		select {
		case ticks <- t:
		case <-sendCtx.Done():
			return
		}
	}
}

// stopped reports whether the run has stopped sending: sendCtx ends at
// Duration, and reqCtx's end (Ctrl-C) reaches sendCtx only a moment later.
func stopped(sendCtx, reqCtx context.Context) bool {
	return sendCtx.Err() != nil || reqCtx.Err() != nil
}

// sendResult is what the load generator keeps of a request it sent.
type sendResult struct {
	outcome      event.Outcome
	retryAfter   time.Duration // a 429's or 503's Retry-After (0 when none)
	outputTokens int
	answer       string // with RequestSpec.KeepAnswer
}

// sendSpec makes one request, already built, and queues its record for
// the emitter. It returns how the request ended, the Retry-After the server
// sent with a 429 or 503 (0 when none) and the answer, read before the
// record leaves this goroutine.
func (r *Runner) sendSpec(ctx context.Context, spec RequestSpec, out chan<- emitItem) sendResult {
	now := time.Now()
	note := sentNote{id: spec.ID, at: now}
	if intended := spec.Intended; !intended.IsZero() {
		note.lag, note.timed = now.Sub(intended), true
	}
	out <- emitItem{sent: note}
	n := r.inFlight.Add(1)
	for p := r.peak.Load(); n > p && !r.peak.CompareAndSwap(p, n); p = r.peak.Load() {
	}
	var rec *event.Request
	var noted notes
	spec.lag = r.lag.begin()
	if nd, ok := r.doer.(notingDoer); ok {
		rec, noted = nd.doNoted(ctx, spec)
	} else {
		rec = r.doer.Do(ctx, spec)
	}
	spec.lag.end()
	if noted.reconnected {
		r.reconnects.Add(1)
	}
	r.inFlight.Add(-1)
	rec = completeRecord(ctx, rec, spec)
	res := sendResult{outcome: rec.Outcome, retryAfter: noted.retryAfter, outputTokens: rec.OutputTokens, answer: noted.answer}
	if w := r.cfg.SlotWatch; w != nil && rec.Abandoned() && rec.Abandon != nil {
		// The record waits for the slot's release; the worker goes on.
		r.releases.Go(func() {
			a := rec.Abandon
			a.Release, a.ReleaseSource, a.ReleaseNote = w.Watch(r.runCtx, rec.SentAt().Add(a.At))
			out <- emitItem{rec: rec, target: spec.PromptTokens}
		})
		return res
	}
	out <- emitItem{rec: rec, target: spec.PromptTokens}
	return res
}

// watchSlots starts the slot watch, when there is one, until the returned
// stop, which waits for it.
func (r *Runner) watchSlots() (stop func()) {
	w := r.cfg.SlotWatch
	if w == nil || !r.cfg.Cancel.Active() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(r.runCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// spec builds the request for seq: ids, trace context and prompt.
func (r *Runner) spec(seq uint64, worker int, intended time.Time) RequestSpec {
	var prompt string
	var promptTokens, outputTokens int
	if r.cfg.Trace != nil {
		prompt, promptTokens, outputTokens = r.prompts.ForTrace(r.cfg.Trace, seq)
	} else {
		prompt, promptTokens, outputTokens = r.prompts.Next(seq)
	}
	ids := randomHex(24)
	spec := RequestSpec{
		ID:           fmt.Sprintf("ls-%s-%d", r.runID, seq),
		TraceID:      ids[:32],
		SpanID:       ids[32:],
		Seq:          seq,
		Worker:       worker,
		Warmup:       seq < uint64(r.cfg.Warmup),
		Prompt:       prompt,
		PromptTokens: promptTokens,
		OutputTokens: outputTokens,
		Intended:     intended,
	}
	r.cfg.Cancel.apply(&spec, r.cfg.Seed)
	return spec
}

// completeRecord makes a Doer's record whole: the identifiers the spec
// decided, and outcome cancelled, marked RunEnded, for a request the run
// stopped (whatever error the cancellation surfaced as, and whatever
// stopped the run: its end, a signal, its caller), so every request sent
// has exactly one record with exactly one outcome and a request cut short
// is never an error. ctx is the context the request was sent with: only
// the run cancels it (a request's own Timeout is the Doer's, a timeout).
func completeRecord(ctx context.Context, rec *event.Request, spec RequestSpec) *event.Request {
	cancelled := ctx.Err() != nil
	if rec == nil {
		rec = &event.Request{Outcome: event.OutcomeMalformed, Error: "probe: doer returned no record"}
	}
	if rec.ID == "" {
		rec.ID = spec.ID
	}
	if rec.TraceID == "" {
		rec.TraceID = spec.TraceID
	}
	if rec.SpanID == "" && rec.TraceID == spec.TraceID {
		rec.SpanID = spec.SpanID
	}
	rec.Seq, rec.Worker = spec.Seq, spec.Worker
	rec.Session, rec.Turn = spec.Session, spec.Turn
	rec.Warmup = rec.Warmup || spec.Warmup
	if rec.TargetOutputTokens == 0 {
		rec.TargetOutputTokens = spec.OutputTokens
	}
	if rec.PromptTokens == 0 {
		rec.PromptTokens = spec.PromptTokens
	}
	if rec.Intended.IsZero() {
		rec.Intended = spec.Intended
		if rec.Intended.IsZero() {
			rec.Intended = rec.Start
		}
	}
	if rec.SchedLag == 0 && !rec.Start.IsZero() && rec.Start.After(rec.Intended) {
		rec.SchedLag = rec.Start.Sub(rec.Intended)
	}
	switch {
	case cancelled && rec.Outcome != event.OutcomeOK && rec.Outcome != event.OutcomeAbandoned:
		rec.Outcome = event.OutcomeCancelled
		rec.RunEnded = true
	case rec.Outcome == "":
		rec.Outcome = event.OutcomeMalformed
		if rec.Error == "" {
			rec.Error = "probe: record without an outcome"
		}
	}
	return rec
}

// watchSelf sends the run's first probe sample, before any request (it
// says the stream is raw, event.ProbeRawV1, so the aggregator judges it
// from the start), then samples the probe and watches its scheduling lag
// until the returned stop, which waits for both.
func (r *Runner) watchSelf(out chan<- emitItem) (stop func()) {
	cpu, ok := processCPUTime()
	r.self.sampleCPU(time.Now(), cpu, ok)
	out <- emitItem{probe: r.probeSample(time.Now())}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.monitor(ctx, out) })
	wg.Go(func() { r.watchLag(ctx, out) })
	return func() { cancel(); wg.Wait() }
}

// monitor samples the probe itself every SelfInterval, after the first
// sample Run sent: in flight, CPU (the emitter adds the raw evidence).
func (r *Runner) monitor(ctx context.Context, out chan<- emitItem) {
	tick := time.NewTicker(r.cfg.SelfInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			now := time.Now() // when the CPU is read: a tick's own time may be long past
			cpu, ok := processCPUTime()
			r.self.sampleCPU(now, cpu, ok)
			select {
			case out <- emitItem{probe: r.probeSample(now)}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// watchLag reports, until ctx ends, each stretch in which the probe's own
// goroutines ran late, for the next sample: those its requests' stamped
// reads saw, and those its timed checks find (see WatchSchedulingLag),
// which run only while a request is in flight unstamped (lagwatch.go).
func (r *Runner) watchLag(ctx context.Context, out chan<- emitItem) {
	every, w := r.cfg.LagSample, r.lag
	if every <= 0 || w == nil {
		return
	}
	report := func(s event.Stretch) {
		select {
		case out <- emitItem{late: &s}:
		case <-ctx.Done():
		}
	}
	tick := time.NewTicker(every)
	tick.Stop()
	defer tick.Stop()
	var ticks <-chan time.Time // nil while no check is due
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-w.stretches:
			report(s)
		case <-w.changed:
			switch timed := w.unstamped.Load() > 0; {
			case timed && ticks == nil:
				last, ticks = r.cfg.LagClock(), tick.C
				tick.Reset(every)
			case !timed && ticks != nil:
				tick.Stop()
				ticks = nil
			}
		case <-ticks:
			t := r.cfg.LagClock()
			if t.Sub(last) > every+lateBy {
				report(event.Stretch{From: last, To: t})
			}
			last = t
		}
	}
}

// probeSample is the probe's state at now for the event stream; the
// emitter adds the raw evidence gathered since the previous one.
func (r *Runner) probeSample(now time.Time) *event.ProbeSample {
	st := r.SelfStats()
	ps := &event.ProbeSample{
		Time: now, InFlight: st.InFlight, MaxInFlight: st.MaxInFlight, CPUPercent: st.CPUPercent, Cores: st.Cores,
		Backoffs: r.backoffs.Load(), Reconnects: r.reconnects.Load(),
	}
	if r.pacer == nil {
		ps.Concurrency = r.level.get()
	}
	if hs, ok := r.doer.(h2Statser); ok {
		if st, ok := hs.HTTP2Stats(); ok {
			ps.H2Connections, ps.H2GoAwayRetries = st.Connections, st.GoAwayRetries
		}
	}
	return ps
}

// randomHex returns 2n random hex digits from crypto/rand, so trace ids
// never repeat across runs even with a fixed seed.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand.Read panics rather than fail)
	for i := range b {
		if b[i] != 0 {
			return hex.EncodeToString(b)
		}
	}
	// An all-zero W3C trace or span id is invalid.
	b[len(b)-1] = 1
	return hex.EncodeToString(b)
}
