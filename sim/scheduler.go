package sim

import "time"

// seq is the engine's view of a running or waiting request.
type seq struct {
	req *request
	// prefilled: its prompt was prefilled elsewhere (a disaggregated
	// deployment's prefill worker); it only decodes here.
	prefilled  bool
	computed   int // prompt tokens prefilled so far (a cached prefix counts)
	generated  int
	kvHeld     int // KV cache tokens held
	pauseUntil time.Time
}

type prefillChunk struct {
	s      *seq
	tokens int
}

// stepPlan is what one engine step computes.
type stepPlan struct {
	start         time.Time
	prefill       []prefillChunk
	decode        []*seq
	prefillTokens int
	admitted      []*request // given a batch slot by this plan
}

func (p *stepPlan) batch() int { return len(p.prefill) + len(p.decode) }

func (p *stepPlan) addPrefill(s *seq, tokens int) {
	p.prefill = append(p.prefill, prefillChunk{s, tokens})
	p.prefillTokens += tokens
}

// plan builds the next step, first queueing the requests handed over
// since the last one (takeInbox). With chunked prefill (the default) it works as
// vLLM V1's scheduler does: running sequences first (a decode token each, or
// the next prefill chunk), then new sequences from the FIFO queue while there
// are free slots, token budget and KV cache. Without it, a step that admits
// new sequences prefills their whole prompts and nothing else, so every
// decoding sequence waits for it, as schedulers without chunked prefill do.
// A slot is freed the moment its sequence finishes (see apply), so a waiting
// request is admitted at the next step. It returns nil and how long to wait
// when nothing can run (zero: until woken). Caller holds e.mu.
func (e *engine) plan(now time.Time) (*stepPlan, time.Duration) {
	e.takeInbox(now)
	e.dropAborted()
	p := &stepPlan{start: now}
	var nextWake time.Time
	if !e.wholePrefill || !e.admitWhole(p, now) {
		var budget int
		budget, nextWake = e.planRunning(p, now)
		if !e.wholePrefill {
			e.admitChunked(p, now, budget)
		}
	}
	e.publishGauges()
	if p.batch() == 0 {
		if nextWake.IsZero() {
			return nil, 0
		}
		return nil, max(nextWake.Sub(now), time.Microsecond)
	}
	return p, 0
}

// planRunning adds the running sequences to p within the token budget and
// returns the budget left and the earliest end of a paused sequence's pause.
func (e *engine) planRunning(p *stepPlan, now time.Time) (budget int, nextWake time.Time) {
	budget = e.budget
	for _, s := range e.running {
		if budget <= 0 {
			break
		}
		if rem := s.req.promptTokens - s.computed; rem > 0 {
			n := min(rem, budget)
			p.addPrefill(s, n)
			budget -= n
			continue
		}
		if now.Before(s.pauseUntil) {
			if nextWake.IsZero() || s.pauseUntil.Before(nextWake) {
				nextWake = s.pauseUntil
			}
			continue
		}
		p.decode = append(p.decode, s)
		budget--
	}
	return budget, nextWake
}

// admitChunked admits queued sequences with the budget left, each with a
// first prefill chunk.
func (e *engine) admitChunked(p *stepPlan, now time.Time, budget int) {
	for len(e.waiting) > 0 && len(e.running) < e.maxSeqs && budget > 0 && e.fits(e.waiting[0]) {
		s := e.admit(p, now)
		if s.prefilled {
			p.decode = append(p.decode, s)
			budget--
			continue
		}
		n := min(s.req.promptTokens-s.computed, budget)
		p.addPrefill(s, n)
		budget -= n
	}
}

// admitWhole admits queued sequences whose whole uncached prompts fit in the
// budget (the first one always), each prefilled in full in this step. It
// reports whether it admitted any.
func (e *engine) admitWhole(p *stepPlan, now time.Time) bool {
	budget := e.budget
	for len(e.waiting) > 0 && len(e.running) < e.maxSeqs && e.fits(e.waiting[0]) {
		if len(p.prefill) > 0 && e.waiting[0].req.promptTokens > budget {
			break
		}
		s := e.admit(p, now)
		if s.prefilled {
			continue // it decodes with the running sequences
		}
		n := s.req.promptTokens - s.computed
		p.addPrefill(s, n)
		budget -= n
	}
	return len(p.prefill) > 0
}

// fits reports whether s's prompt fits in the KV cache; with nothing running
// it is admitted anyway, or it would wait forever.
func (e *engine) fits(s *seq) bool {
	return e.kvUsed+s.req.promptTokens <= e.prof.KVCapacityTokens || len(e.running) == 0
}

// admit gives the head of the queue a batch slot: it skips the prompt's
// cached prefix and reserves KV cache for the whole prompt. Caller holds e.mu.
func (e *engine) admit(p *stepPlan, now time.Time) *seq {
	s := e.waiting[0]
	e.waiting[0] = nil
	e.waiting = e.waiting[1:]
	r := s.req
	if s.prefilled {
		r.eng.decodeScheduled = now
		s.computed = r.promptTokens
	} else {
		r.eng.scheduled = now
		s.computed = e.cachedPrefix(r)
		r.eng.cachedTokens = s.computed
	}
	s.kvHeld = r.promptTokens
	e.kvUsed += r.promptTokens
	e.running = append(e.running, s)
	p.admitted = append(p.admitted, r)
	return s
}

// cachedPrefix returns how many of r's prompt tokens the prefix cache
// already holds. Caller holds e.mu.
func (e *engine) cachedPrefix(r *request) int {
	if e.cache == nil {
		return 0
	}
	n := cachedTokens(e.cache.lookup(r.blockHashes), r.promptTokens)
	e.cache.count(r.promptTokens, n)
	e.m.prefixQueries.Add(float64(r.promptTokens))
	e.m.prefixHits.Add(float64(n))
	return n
}

// release counts s out of the engine's load (addPrefilled counted it in).
func (e *engine) release(s *seq) {
	if s.prefilled {
		e.load.Add(-1)
	}
}

// dropAborted removes sequences whose client is gone. Caller holds e.mu.
func (e *engine) dropAborted() {
	keep := e.waiting[:0]
	for _, s := range e.waiting {
		if !s.req.aborted.Load() {
			keep = append(keep, s)
			continue
		}
		e.release(s)
		e.released(s.req, time.Now(), false)
	}
	clear(e.waiting[len(keep):])
	e.waiting = keep
	run := e.running[:0]
	for _, s := range e.running {
		if s.req.aborted.Load() {
			e.kvUsed -= s.kvHeld
			e.release(s)
			e.released(s.req, time.Now(), false)
			continue
		}
		run = append(run, s)
	}
	clear(e.running[len(run):])
	e.running = run
}

// apply records the results of a step that ended at end and returns the
// tokens it produced, in order. Caller holds e.mu.
func (e *engine) apply(p *stepPlan, end time.Time) []tokenEvent {
	for _, c := range p.prefill {
		r := c.s.req
		r.eng.prefillSteps = append(r.eng.prefillSteps, PrefillStep{
			StartUnixUs: p.start.UnixMicro(), EndUnixUs: end.UnixMicro(),
			Tokens: c.tokens, DecodeSeqs: len(p.decode),
		})
		c.s.computed += c.tokens
		if c.s.computed == r.promptTokens {
			r.eng.prefillEnd = end
			e.m.promptTokens.Add(float64(r.promptTokens))
			if e.cache != nil {
				e.cache.insert(r.blockHashes)
			}
		}
	}
	var out []tokenEvent
	finished := false
	for _, s := range p.decode {
		if s.req.aborted.Load() {
			continue
		}
		s.generated++
		s.kvHeld++
		e.kvUsed++
		r := s.req
		if s.generated == 1 {
			r.eng.firstToken = end
		}
		r.eng.lastToken = end
		last := s.generated >= r.target
		out = append(out, tokenEvent{req: r, index: s.generated - 1, at: end, last: last})
		if last {
			finished = true
		} else if r.stallAt > 0 && s.generated == r.stallAt {
			s.pauseUntil = end.Add(r.fault.Stall)
		}
	}
	e.m.generationTokens.Add(float64(len(out)))
	if finished {
		run := e.running[:0]
		for _, s := range e.running {
			if s.generated >= s.req.target && s.generated > 0 {
				e.kvUsed -= s.kvHeld
				e.release(s)
				e.released(s.req, end, true)
				continue
			}
			run = append(run, s)
		}
		clear(e.running[len(run):])
		e.running = run
	}
	e.recordStep(p.start, end, p.batch())
	e.publishGauges()
	return out
}
