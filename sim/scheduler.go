package sim

import "time"

// seq is the engine's view of a running or waiting request.
type seq struct {
	req        *request
	computed   int // prompt tokens prefilled so far
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
}

func (p *stepPlan) batch() int { return len(p.prefill) + len(p.decode) }

// plan builds the next step, as vLLM V1's scheduler does: running sequences
// first (a decode token each, or the next prefill chunk), then new sequences
// from the FIFO queue while there are free slots, token budget and KV cache.
// A slot is freed the moment its sequence finishes (see apply), so a waiting
// request is admitted at the next step. It returns nil and how long to wait
// when nothing can run (zero: until woken). Caller holds e.mu.
func (e *engine) plan(now time.Time) (*stepPlan, time.Duration) {
	e.dropAborted()
	p := &stepPlan{start: now}
	budget := e.budget
	var nextWake time.Time
	for _, s := range e.running {
		if budget <= 0 {
			break
		}
		if rem := s.req.promptTokens - s.computed; rem > 0 {
			n := min(rem, budget)
			p.prefill = append(p.prefill, prefillChunk{s, n})
			p.prefillTokens += n
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
	for len(e.waiting) > 0 && len(e.running) < e.maxSeqs && budget > 0 {
		s := e.waiting[0]
		prompt := s.req.promptTokens
		if e.kvUsed+prompt > e.prof.KVCapacityTokens && len(e.running) > 0 {
			break // wait for running sequences to free cache
		}
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		s.req.eng.scheduled = now
		s.kvHeld = prompt
		e.kvUsed += prompt
		e.running = append(e.running, s)
		n := min(prompt, budget)
		p.prefill = append(p.prefill, prefillChunk{s, n})
		p.prefillTokens += n
		budget -= n
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

// dropAborted removes sequences whose client is gone. Caller holds e.mu.
func (e *engine) dropAborted() {
	keep := e.waiting[:0]
	for _, s := range e.waiting {
		if !s.req.aborted.Load() {
			keep = append(keep, s)
		}
	}
	clear(e.waiting[len(keep):])
	e.waiting = keep
	run := e.running[:0]
	for _, s := range e.running {
		if s.req.aborted.Load() {
			e.kvUsed -= s.kvHeld
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
		c.s.computed += c.tokens
		if c.s.computed == c.s.req.promptTokens {
			c.s.req.eng.prefillEnd = end
			e.m.promptTokens.Add(float64(c.s.req.promptTokens))
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
