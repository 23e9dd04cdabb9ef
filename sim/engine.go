package sim

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// engine is the simulated model executor: one goroutine running steps back
// to back while there is work. Each step prefills chunks of newly admitted
// sequences and decodes one token for every running sequence; its cost grows
// with both (Profile.stepCost).
type engine struct {
	prof         Profile
	maxSeqs      int
	budget       int
	wholePrefill bool         // prefill admitted prompts whole, in steps of their own
	cache        *prefixCache // nil: no prefix caching
	m            *metrics
	emit         func(tokenEvent) // hands a token to the front end; must not block
	// onSlot, if set, is told of each request given a batch slot, before any
	// of its tokens are emitted; it must not block.
	onSlot func(*request)
	// publish, if set, publishes the scheduler gauges in its place (a
	// disaggregated deployment sums its workers'); it must not block.
	publish func()
	wake    chan struct{}
	// The counts publishGauges last saw, for a publish that sums them.
	nWaiting, nRunning, nKV atomic.Int64
	// load is the requests handed to the engine and not yet finished.
	load atomic.Int64

	mu sync.Mutex
	// inbox holds the requests handed over while a step ran: as vLLM's
	// engine core drains its input queue into the scheduler only between
	// steps, they join waiting (and are stamped queued) when the next step
	// is planned, so a wait for the running step is not a queue.
	inbox     []*seq
	waiting   []*seq
	running   []*seq
	kvUsed    int
	lastBatch int
	recent    []stepRecord   // steps that ended in the last second
	releases  []AbandonTruth // the latest abandoned requests' slot releases, oldest first
}

// AbandonTruth is the truth of one request whose client went away while
// it held a batch slot: when the handler saw the client go, and when the
// engine gave the slot up (its gauges published at once), having aborted
// it or, with Config.KeepAbandoned, decoded it to the end for nobody.
type AbandonTruth struct {
	RequestID        string `json:"request_id"`
	GoneUnixNs       int64  `json:"gone_unix_ns"`
	ReleasedUnixNs   int64  `json:"released_unix_ns"`
	DecodedForNobody bool   `json:"decoded_for_nobody"`
}

// maxAbandonTruths bounds the releases kept.
const maxAbandonTruths = 4096

// released notes that r, whose client went away, gave its slot up at at.
// Caller holds e.mu.
func (e *engine) released(r *request, at time.Time, finished bool) {
	gone := r.goneAt.Load()
	if gone == 0 {
		return // finished with its client there, or reset by a fault
	}
	if len(e.releases) >= maxAbandonTruths {
		e.releases = append(e.releases[:0], e.releases[1:]...)
	}
	e.releases = append(e.releases, AbandonTruth{RequestID: r.id, GoneUnixNs: gone, ReleasedUnixNs: at.UnixNano(), DecodedForNobody: finished})
}

// abandonTruths returns a copy of the releases kept.
func (e *engine) abandonTruths() []AbandonTruth {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.releases)
}

// prefixCacheTruth is the prefix cache's truth (zero without one).
func (e *engine) prefixCacheTruth() PrefixCacheTruth {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cache == nil {
		return PrefixCacheTruth{}
	}
	return e.cache.snapshot()
}

type stepRecord struct{ start, end time.Time }

// statsWindow is the window of Stats' rates.
const statsWindow = time.Second

// newEngine makes an engine with prof's slots and budget that hands its
// tokens to emit.
func newEngine(prof Profile, m *metrics, emit func(tokenEvent)) *engine {
	return &engine{prof: prof, maxSeqs: prof.MaxNumSeqs, budget: prof.MaxBatchedTokens, m: m, emit: emit, wake: make(chan struct{}, 1)}
}

// add hands a tokenized request to the engine; the next plan queues it.
func (e *engine) add(r *request) {
	e.mu.Lock()
	e.inbox = append(e.inbox, &seq{req: r})
	e.mu.Unlock()
	e.kick()
}

// addPrefilled hands the engine a request whose prompt another worker
// prefilled (its KV cache has arrived): it needs a batch slot, then decodes.
func (e *engine) addPrefilled(r *request) {
	e.load.Add(1)
	e.mu.Lock()
	e.inbox = append(e.inbox, &seq{req: r, prefilled: true})
	e.mu.Unlock()
	e.kick()
}

// takeInbox moves the requests handed over since the last plan to the
// waiting queue, stamped queued at now. Caller holds e.mu.
func (e *engine) takeInbox(now time.Time) {
	for _, s := range e.inbox {
		if !s.prefilled {
			s.req.eng.queued = now
		}
		e.waiting = append(e.waiting, s)
	}
	clear(e.inbox)
	e.inbox = e.inbox[:0]
}

// kick wakes the step loop.
func (e *engine) kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// times returns a copy of r's engine timestamps.
func (e *engine) times(r *request) engineTimes {
	e.mu.Lock()
	defer e.mu.Unlock()
	et := r.eng
	et.prefillSteps = slices.Clone(et.prefillSteps)
	return et
}

// run is the step loop; it returns when ctx ends.
func (e *engine) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		e.mu.Lock()
		p, wait := e.plan(time.Now())
		e.mu.Unlock()
		if p == nil {
			var tc <-chan time.Time
			if wait > 0 {
				timer.Reset(wait)
				tc = timer.C
			}
			select {
			case <-e.wake:
			case <-tc:
			case <-ctx.Done():
				return
			}
			timer.Stop()
			continue
		}
		if e.onSlot != nil {
			for _, r := range p.admitted {
				e.onSlot(r)
			}
		}
		pauseFrom(p.start, e.prof.stepCost(p.prefillTokens, len(p.decode)))
		end := time.Now()
		e.mu.Lock()
		events := e.apply(p, end)
		e.mu.Unlock()
		for _, ev := range events {
			e.emit(ev)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// recordStep keeps the steps of the last statsWindow. Caller holds e.mu.
func (e *engine) recordStep(start, end time.Time, batch int) {
	e.lastBatch = batch
	e.recent = append(e.recent, stepRecord{start, end})
	e.trimSteps(end)
}

func (e *engine) trimSteps(now time.Time) {
	cut := 0
	for cut < len(e.recent) && now.Sub(e.recent[cut].end) > statsWindow {
		cut++
	}
	if cut > 0 {
		n := copy(e.recent, e.recent[cut:])
		clear(e.recent[n:])
		e.recent = e.recent[:n]
	}
}

// publishGauges sets the scheduler gauges. Caller holds e.mu.
func (e *engine) publishGauges() {
	e.nWaiting.Store(int64(len(e.waiting)))
	e.nRunning.Store(int64(len(e.running)))
	e.nKV.Store(int64(e.kvUsed))
	if e.publish != nil {
		e.publish()
		return
	}
	e.m.waiting.Set(float64(len(e.waiting)))
	e.m.running.Set(float64(len(e.running)))
	e.m.kvUsage.Set(e.kvUsageLocked())
}

func (e *engine) kvUsageLocked() float64 {
	return min(float64(e.kvUsed)/float64(e.prof.KVCapacityTokens), 1)
}

// Stats is a snapshot of the engine, for a simulated GPU panel.
type Stats struct {
	Waiting     int     // requests in the queue
	Running     int     // requests holding a batch slot
	BatchSize   int     // sequences in the last engine step
	StepsPerSec float64 // engine steps that ended in the last second
	Busy        float64 // fraction of the last second the engine spent in steps
	KVUsage     float64 // fraction of the KV cache held by running sequences
}

func (e *engine) stats(now time.Time) Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.trimSteps(now)
	from := now.Add(-statsWindow)
	var busy time.Duration
	for _, s := range e.recent {
		start := s.start
		if start.Before(from) {
			start = from
		}
		busy += s.end.Sub(start)
	}
	return Stats{
		Waiting:     len(e.waiting),
		Running:     len(e.running),
		BatchSize:   e.lastBatch,
		StepsPerSec: float64(len(e.recent)) / statsWindow.Seconds(),
		Busy:        min(busy.Seconds()/statsWindow.Seconds(), 1),
		KVUsage:     e.kvUsageLocked(),
	}
}
