package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Disagg splits the simulated server into a prefill pool and a decode pool
// joined by a KV-cache link, as disaggregated serving does (llm-d, NVIDIA
// Dynamo, SGLang's PD mode): a request waits in the prefill queue for a
// prefill worker, which computes its whole prompt; its KV cache then crosses
// the link; it waits in the decode queue of the least busy decode worker
// (a continuous-batching engine of its own) for a batch slot; the decode
// worker's first step makes its first token. Its zero value is off.
type Disagg struct {
	Enabled bool
	// PrefillWorkers is the prefill pool: each worker prefills one prompt at
	// a time, whole, in one step of the profile's cost. 0: 1.
	PrefillWorkers int
	// DecodeWorkers is the decode pool: each worker is an engine with the
	// profile's batch slots and KV cache. 0: 1.
	DecodeWorkers int
	// KVBytesPerToken is the size of one token's KV cache on the link.
	// 0: DefaultKVBytesPerToken.
	KVBytesPerToken int64
	// KVBandwidth is the link's bandwidth in bytes per second; each transfer
	// has the whole of it (transfers are not made to contend). 0:
	// DefaultKVBandwidth.
	KVBandwidth float64
	// KVLatency is the fixed cost of one transfer (setting it up, the
	// link's latency).
	KVLatency time.Duration
}

// The KV link's defaults: a 7B llama's KV cache in 16-bit floats (32
// layers × keys and values × 4,096 wide × 2 bytes), over a 400 Gb/s RDMA
// link.
const (
	DefaultKVBytesPerToken = 32 * 2 * 4096 * 2
	DefaultKVBandwidth     = 50e9
)

// withDefaults returns d with its zero fields set to their defaults.
func (d Disagg) withDefaults() Disagg {
	if d.PrefillWorkers == 0 {
		d.PrefillWorkers = 1
	}
	if d.DecodeWorkers == 0 {
		d.DecodeWorkers = 1
	}
	if d.KVBytesPerToken == 0 {
		d.KVBytesPerToken = DefaultKVBytesPerToken
	}
	if d.KVBandwidth == 0 {
		d.KVBandwidth = DefaultKVBandwidth
	}
	return d
}

// TransferTime is how long the KV cache of a prompt of promptTokens takes
// to cross the link: the latency, then the bytes at the link's bandwidth.
func (d Disagg) TransferTime(promptTokens int) time.Duration {
	d = d.withDefaults()
	secs := float64(d.KVBytesPerToken) * float64(promptTokens) / d.KVBandwidth
	return d.KVLatency + time.Duration(secs*float64(time.Second))
}

// maxDisaggWorkers bounds each pool, so a typo cannot start a million
// goroutines.
const maxDisaggWorkers = 1024

// validate checks the settings, each named as the sim command's flag.
func (d Disagg) validate() error {
	var errs []error
	for _, w := range []struct {
		name string
		n    int
	}{{"prefill-workers", d.PrefillWorkers}, {"decode-workers", d.DecodeWorkers}} {
		if w.n < 0 || w.n > maxDisaggWorkers {
			errs = append(errs, fmt.Errorf("%s %d: want 1 to %d (0: 1)", w.name, w.n, maxDisaggWorkers))
		}
	}
	if d.KVBytesPerToken < 0 {
		errs = append(errs, fmt.Errorf("kv-bytes-per-token %d: want more than 0", d.KVBytesPerToken))
	}
	if d.KVBandwidth < 0 || d.KVBandwidth != d.KVBandwidth {
		errs = append(errs, fmt.Errorf("kv-bandwidth %v: want bytes per second, more than 0", d.KVBandwidth))
	}
	if d.KVLatency < 0 {
		errs = append(errs, fmt.Errorf("kv-latency %v: want a duration of 0 or more", d.KVLatency))
	}
	return errors.Join(errs...)
}

// disaggTimes are a request's timestamps before it reaches a decode worker.
type disaggTimes struct {
	queued       time.Time // joined the prefill queue
	start        time.Time // a prefill worker took it
	prefillEnd   time.Time // its prompt was computed
	kvDone       time.Time // the link delivered its KV cache
	handedOver   time.Time // it was handed to a decode worker
	prefillSteps []PrefillStep
}

// disaggPool is the prefill pool, the KV link and the decode pool.
type disaggPool struct {
	cfg    Disagg
	prof   Profile
	m      *metrics
	decode []*engine
	wake   chan struct{}

	mu         sync.Mutex
	queue      []*request
	times      map[*request]*disaggTimes
	onEngine   map[*request]*engine // the decode worker each request went to
	prefilling atomic.Int64
	wg         sync.WaitGroup
}

func newDisaggPool(cfg Disagg, prof Profile, m *metrics, decode []*engine) *disaggPool {
	p := &disaggPool{cfg: cfg.withDefaults(), prof: prof, m: m, decode: decode, wake: make(chan struct{}, 1),
		times: make(map[*request]*disaggTimes), onEngine: make(map[*request]*engine)}
	for _, e := range decode {
		e.publish = p.publishGauges
	}
	return p
}

// run starts the prefill workers and the decode engines; it returns once
// ctx has ended and all of them (and every transfer) have stopped.
func (p *disaggPool) run(ctx context.Context) {
	for range p.cfg.PrefillWorkers {
		p.wg.Go(func() { p.prefillWorker(ctx) })
	}
	for _, e := range p.decode {
		p.wg.Go(func() { e.run(ctx) })
	}
	<-ctx.Done()
	p.wg.Wait()
}

// add puts a tokenized request in the prefill queue.
func (p *disaggPool) add(r *request) {
	p.mu.Lock()
	p.times[r] = &disaggTimes{queued: time.Now()}
	p.queue = append(p.queue, r)
	p.mu.Unlock()
	p.publishGauges()
	p.kick()
}

func (p *disaggPool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// kickAll wakes the decode engines (one of them drops an aborted request).
func (p *disaggPool) kickAll() {
	p.kick()
	for _, e := range p.decode {
		e.kick()
	}
}

// take pops the head of the prefill queue, skipping requests whose client
// is gone; nil when it is empty.
func (p *disaggPool) take(now time.Time) (*request, *disaggTimes) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) > 0 {
		r := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if r.aborted.Load() {
			continue
		}
		t := p.times[r]
		t.start = now
		if len(p.queue) > 0 {
			p.kick() // another worker may take the next one
		}
		p.prefilling.Add(1)
		return r, t
	}
	return nil, nil
}

// prefillWorker prefills queued prompts one at a time until ctx ends.
func (p *disaggPool) prefillWorker(ctx context.Context) {
	for {
		r, t := p.take(time.Now())
		if r == nil {
			p.publishGauges()
			select {
			case <-p.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		p.publishGauges()
		start := t.start
		pauseFrom(start, p.prof.stepCost(r.promptTokens, 0))
		end := time.Now()
		p.mu.Lock()
		t.prefillEnd = end
		t.prefillSteps = append(t.prefillSteps, PrefillStep{StartUnixUs: start.UnixMicro(), EndUnixUs: end.UnixMicro(), Tokens: r.promptTokens})
		p.mu.Unlock()
		p.prefilling.Add(-1)
		p.m.promptTokens.Add(float64(r.promptTokens))
		p.wg.Go(func() { p.transfer(ctx, r, t, end) })
		if ctx.Err() != nil {
			return
		}
	}
}

// transfer carries r's KV cache over the link, then hands r to the least
// busy decode worker. The transfer ends when the link delivers the last
// byte (from + TransferTime); a late hand-off after it (a busy host) is
// the simulator's own, and falls in the truth's other_us with the other
// hand-offs between goroutines.
func (p *disaggPool) transfer(ctx context.Context, r *request, t *disaggTimes, from time.Time) {
	d := p.cfg.TransferTime(r.promptTokens)
	if !pauseCtx(ctx, from, d) {
		return
	}
	now := time.Now()
	e := p.leastBusy()
	p.mu.Lock()
	t.kvDone = from.Add(d)
	t.handedOver = now
	p.onEngine[r] = e
	p.mu.Unlock()
	e.addPrefilled(r)
}

// pauseCtx waits until d has passed since start, as pauseFrom does, or
// until ctx ends; it reports whether the wait ran its course.
func pauseCtx(ctx context.Context, start time.Time, d time.Duration) bool {
	if sleep := d - time.Since(start) - spinTail; sleep > 0 {
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	for time.Since(start) < d {
		runtime.Gosched()
	}
	return ctx.Err() == nil
}

// leastBusy is the decode worker with the fewest requests, waiting or
// running (the first of equals).
func (p *disaggPool) leastBusy() *engine {
	best, load := p.decode[0], int64(-1)
	for _, e := range p.decode {
		if n := e.load.Load(); load < 0 || n < load {
			best, load = e, n
		}
	}
	return best
}

// timesOf is r's engine timestamps: the prefill pool's, the link's and its
// decode worker's. queued, scheduled and prefillEnd are the prefill pool's
// (so vLLM's queue and prefill histograms cover the prefill side).
func (p *disaggPool) timesOf(r *request) engineTimes {
	p.mu.Lock()
	t, e := p.times[r], p.onEngine[r]
	var pt disaggTimes
	if t != nil {
		pt = *t
		pt.prefillSteps = slices.Clone(t.prefillSteps)
	}
	p.mu.Unlock()
	var et engineTimes
	if e != nil {
		et = e.times(r)
	}
	et.disagg = true
	et.queued, et.scheduled, et.prefillEnd, et.kvDone, et.decodeQueued = pt.queued, pt.start, pt.prefillEnd, pt.kvDone, pt.handedOver
	et.prefillSteps = pt.prefillSteps
	return et
}

// forget drops what the pool keeps of a finished request.
func (p *disaggPool) forget(r *request) {
	p.mu.Lock()
	delete(p.times, r)
	delete(p.onEngine, r)
	p.mu.Unlock()
}

// publishGauges sets vLLM's scheduler gauges for the whole deployment:
// waiting counts the prefill queue and the decode workers' queues, running
// the prompts being prefilled and the decode workers' batches, KV usage the
// decode pool's.
func (p *disaggPool) publishGauges() {
	p.mu.Lock()
	waiting := int64(len(p.queue))
	p.mu.Unlock()
	running := p.prefilling.Load()
	var kv int64
	for _, e := range p.decode {
		waiting += e.nWaiting.Load()
		running += e.nRunning.Load()
		kv += e.nKV.Load()
	}
	p.m.waiting.Set(float64(waiting))
	p.m.running.Set(float64(running))
	p.m.kvUsage.Set(min(float64(kv)/float64(int64(p.prof.KVCapacityTokens)*int64(len(p.decode))), 1))
}
