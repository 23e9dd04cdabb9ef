package stall

import (
	"fmt"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// reqFacts is what one finished request says about the server's time line,
// on the probe's clock: the evidence a stall's cause is decided from.
type reqFacts struct {
	id        string
	sent      time.Time // the request was written: it reached the server about then
	frontDone time.Time // its response headers arrived (zero: none)
	first     time.Time // its first content chunk arrived (zero: none)
	end       time.Time // the last the probe saw of it
	streamed  interval  // first to last read with content (zero: fewer than two)
	// frontEnd and prefill are the server's own timing of this request's
	// front-end work and prefill, placed from when it was sent and when
	// its first token came (zero when the server reported none).
	frontEnd interval
	prefill  interval
	// No chunk arrival times: they grow with the tokens streamed, and the
	// one use of them (whether a stream resumed in a burst) is decided when
	// its gap is found and kept with it. A reqFacts is a fixed size, so
	// MaxRequests bounds the evidence's bytes, whatever the token rate.
}

// pastFrontEnd is when f was done with the server's front end, as far as
// the probe can tell: its response headers, else when it was written.
func (f *reqFacts) pastFrontEnd() time.Time {
	if f.frontDone.IsZero() {
		return f.sent
	}
	return f.frontDone
}

// frontEndWindow is f's front-end work: the server's timing of it, else
// from when it was written to its response headers; ok is false when
// neither is known.
func (f *reqFacts) frontEndWindow() (w interval, server, ok bool) {
	if f.frontEnd.dur() > 0 {
		return f.frontEnd, true, true
	}
	w = interval{f.sent, f.frontDone}
	return w, false, !f.frontDone.IsZero() && w.dur() > 0
}

// factsOf extracts r's evidence, named id, with its reads (see readsOf);
// false when r never reached the server.
func factsOf(r *event.Request, id string, reads []time.Duration) (reqFacts, bool) {
	sent, ok := stageEnd(r, event.StageWrite)
	if !ok || r.Start.IsZero() {
		return reqFacts{}, false
	}
	f := reqFacts{id: id, sent: sent, end: sent}
	f.frontDone, _ = stageEnd(r, event.StageWaitHeaders)
	if n := len(r.Chunks); n > 0 {
		f.first = r.Start.Add(r.Chunks[0].At)
		f.end = r.Start.Add(r.Chunks[n-1].At)
		if len(reads) > 1 {
			f.streamed = interval{r.Start.Add(reads[0]), r.Start.Add(reads[len(reads)-1])}
		}
	}
	if e := r.Intended.Add(r.E2E); r.E2E > 0 && e.After(f.end) {
		f.end = e
	}
	if st := r.Server; st != nil {
		if tok, ok := st.Stages[event.StageTokenize]; ok && tok > 0 {
			f.frontEnd = interval{sent, sent.Add(st.Stages[event.StageHTTP] + tok)}
		}
		if pre, ok := st.Stages[event.StagePrefill]; ok && pre > 0 && !f.first.IsZero() {
			f.prefill = interval{f.first.Add(-pre - st.Stages[event.StageFirstDecode]), f.first}
		}
	}
	return f, true
}

// stageEnd is when r's client stage s ended: the stages run back to back
// from the intended send time.
func stageEnd(r *event.Request, s event.Stage) (time.Time, bool) {
	t := r.Intended
	if t.IsZero() {
		t = r.Start.Add(-r.SchedLag)
	}
	for _, st := range r.Stages {
		t = t.Add(st.Duration)
		if st.Stage == s {
			return t, true
		}
	}
	return time.Time{}, false
}

// verdict is a stall's cause and what shows it.
type verdict struct {
	cause    event.StallCause
	label    string // the marker's first words when not causeWords' (with a figure)
	evidence string
	values   map[string]float64
	closer   *reqFacts // the request whose first token ended the pause
}

// closeWithin is how many of the streams' normal gaps after a pause a
// request's first token may come and still be the end of its prefill:
// with chunked prefill the last chunk and the first token take a step or
// two after the long one, and a slow step may follow.
const closeWithin = 4

// Server is what is known of the server's design: which of the probe's
// signatures are evidence of a cause on it. The zero value, a server of
// unknown design (a plain OpenAI-compatible one, a gateway), takes only
// the server's own timing (Server-Timing stages, spans) as evidence: on
// it, a burst of tokens or another request's first token at a pause's end
// is what was seen, not what caused it.
type Server struct {
	// Kind is the server kind detected ("vllm", "openai"; empty when
	// unknown), named in the evidence.
	Kind string
	// BatchesPrefill: the server prefills new prompts in the engine steps
	// that decode the running streams (continuous batching), so another
	// request's first token ending a pause marks its prefill in it.
	BatchesPrefill bool
	// TokenizesOnLoop: the server can tokenize on the loop that writes the
	// streams' frames, so the streams' tokens piling up behind a pause
	// (the engine kept decoding) mark its front end blocked.
	TokenizesOnLoop bool
}

// name says which server the evidence speaks of.
func (s Server) name() string {
	if s.Kind == "" {
		return "a server of unknown kind"
	}
	return "the server (" + s.Kind + ")"
}

// SetServer tells the detector what is known of the server's design (the
// session's detected server kind): stalls decided from then on take its
// signatures as evidence.
func (d *Detector) SetServer(s Server) { d.cfg.Server = s }

// classify decides one stall's cause, strongest evidence first: the
// client host, short of CPU to others (its delays are the probe's, whatever
// else the streams show); the probe itself; the server's front end, when the streams' tokens piled up behind
// the pause (a blocked front end does not stop the engine) and a request's
// front-end work lies in it, or no request of the probe could have been in
// prefill; then a prefill ending it. A signature counts only where the
// server's design makes it evidence (Server); otherwise the pause is
// unexplained, and its message says what was seen.
func (d *Detector) classify(s *stallGroup) verdict {
	if v, ok := d.hostOver(s); ok {
		return v
	}
	if v, ok := d.starvedOver(s); ok {
		return v
	}
	srv := d.cfg.Server
	burst, of := s.burstAfter()
	held := 2*burst >= of
	var seen []string
	if v, server, ok := d.frontEndOver(s); ok && held {
		v.evidence += fmt.Sprintf(", and the tokens of %d of %d streams came in a burst when it ended", burst, of)
		if server || srv.TokenizesOnLoop {
			v.values["burst_streams"] = float64(burst)
			return v
		}
		seen = append(seen, fmt.Sprintf("%s (%s is not known to tokenize on the loop that writes its frames)", v.evidence, srv.name()))
	}
	closed, closedOK := d.prefillClosed(s)
	if closedOK && srv.BatchesPrefill {
		return closed
	}
	if v, ok := d.prefillTimed(s); ok {
		return v
	}
	if closedOK {
		seen = append(seen, fmt.Sprintf("request %s's first token came %s (%s is not known to prefill in the steps that decode, so that is no sign of a prefill in it)",
			closed.closer.id, relative(closed.closer.first.Sub(s.to), "after it", "before the streams resumed"), srv.name()))
	}
	possible, inFlight := d.prefillsPossible(s)
	if possible == 0 && held && srv.TokenizesOnLoop {
		return verdict{cause: event.StallFrontEndBlock,
			evidence: fmt.Sprintf("no prefill ran in it (no request of the probe was between its response headers and its first token), and the tokens of %d of %d streams piled up and came in a burst when it ended: the engine kept decoding while the front end held the frames", burst, of),
			values:   map[string]float64{"burst_streams": float64(burst)}}
	}
	v := unexplained(possible, inFlight, burst, of)
	if len(seen) > 0 {
		v.evidence += "; seen: " + strings.Join(seen, "; ")
	}
	return v
}

// unexplained is the verdict on a pause nothing explains, saying what the
// requests then in flight allow.
func unexplained(possible, inFlight, burst, of int) verdict {
	if possible == 0 {
		held := "no burst of held tokens ended it"
		if 2*burst >= of {
			held = "the tokens of the streams came in a burst when it ended"
		}
		return verdict{cause: event.StallUnexplained,
			evidence: fmt.Sprintf("no prefill of the probe's ran in it, and %s (%d of %d streams): the engine itself paused, or the server's host was starved", held, burst, of),
			values:   map[string]float64{"burst_streams": float64(burst)}}
	}
	return verdict{cause: event.StallUnexplained,
		evidence: fmt.Sprintf("nothing shows a prefill, the server's front end or the probe in it (%d of the %d request(s) then in flight had no first token yet: any may have been in prefill)", possible, inFlight),
		values:   map[string]float64{"maybe_prefilling": float64(possible), "in_flight": float64(inFlight)}}
}

// burstAfter counts the stall's streams whose tokens came in a burst as
// they resumed (heldBurst). A blocked front end (tokenization, the event
// loop) does not stop the engine, so the tokens it made meanwhile arrive
// together once the frames go out; a pause of the engine itself ends with
// the next token alone. Each stream is judged from its own resumption: a
// front end flushing the held frames one stream after another resumes
// them a few milliseconds apart.
func (s *stallGroup) burstAfter() (burst, of int) {
	for _, b := range s.bursts {
		if b {
			burst++
		}
	}
	return burst, len(s.bursts)
}

// starvedOver: the probe's own scheduling lag covers at least half the pause.
func (d *Detector) starvedOver(s *stallGroup) (verdict, bool) {
	p := s.span()
	var covered time.Duration
	for _, w := range d.starved {
		covered += p.overlap(w)
	}
	covered = min(covered, p.dur())
	if 2*covered < p.dur() {
		return verdict{}, false
	}
	share := covered.Seconds() / p.dur().Seconds()
	return verdict{cause: event.StallProbeStarved,
		evidence: fmt.Sprintf("latscope's own goroutines ran late for %s of it (%.0f%%): the probe paused, not the server", fmtMS(covered), 100*share),
		values:   map[string]float64{"covered_share": share, "probe_lag_ms": ms(covered)}}, true
}

// frontEndOver: a request's front-end work (the server's timing of it, or
// from when it was written to its response headers) lies mostly in the
// pause and covers at least half of what the pause took beyond a normal
// gap. A window much longer than the pause (headers sent only with a batch
// slot, so the queue is in it) is no evidence, nor is a short one that
// explains little of it.
//
// server says the window is the server's own timing of its front end.
func (d *Detector) frontEndOver(s *stallGroup) (v verdict, server, ok bool) {
	p := s.span()
	excess := max(p.dur()-s.itl(), p.dur()/4)
	var best *reqFacts
	var bestOv time.Duration
	var bestServer bool
	for i := range d.requests {
		f := &d.requests[i]
		w, server, ok := f.frontEndWindow()
		if !ok {
			continue
		}
		ov := p.overlap(w)
		if 2*ov >= excess && 2*ov >= w.dur() && ov > bestOv {
			best, bestOv, bestServer = f, ov, server
		}
	}
	if best == nil {
		return verdict{}, false, false
	}
	share := bestOv.Seconds() / p.dur().Seconds()
	what := fmt.Sprintf("request %s was written %s and got its response headers %s: its front-end work (parsing, tokenization) covers %.0f%% of the pause",
		best.id, relative(p.from.Sub(best.sent), "before it", "into it"), relative(best.frontDone.Sub(p.to), "after it", "before its end"), 100*share)
	if bestServer {
		what = fmt.Sprintf("the server's tokenization of request %s (%s) covers %.0f%% of it", best.id, fmtMS(best.frontEnd.dur()), 100*share)
	}
	return verdict{cause: event.StallFrontEndBlock, evidence: what,
		values: map[string]float64{"covered_share": share, "front_end_ms": ms(bestOv)}}, bestServer, true
}

// prefillClosed: another request's first token ended the pause: it came
// within closeWithin normal gaps of its end, or, for a request that was
// waiting for it through the pause, it was the next thing the server sent
// the probe after the pause (a long step after it, such as other queued
// prompts prefilled together, delays the first token of the prompt
// prefilled in the pause past those gaps, and nothing else came between).
func (d *Detector) prefillClosed(s *stallGroup) (verdict, bool) {
	p := s.span()
	limit := p.to.Add(closeWithin * s.itl())
	var closer, late *reqFacts
	for i := range d.requests {
		f := &d.requests[i]
		if s.has(f.id) || f.first.IsZero() || !f.first.After(p.from) {
			continue
		}
		switch {
		case !f.first.After(limit):
			if closer == nil || f.first.Before(closer.first) {
				closer = f
			}
		case waitedThrough(f, s) && (late == nil || f.first.Before(late.first)):
			late = f
		}
	}
	how := "its prefill ran in the pause"
	if closer == nil && late != nil && d.quietBetween(p.to.Add(s.itl()/2), late.first) {
		closer = late
		how = "the first content the server sent after it, nothing between, so its prefill ran in the pause"
	}
	if closer == nil {
		return verdict{}, false
	}
	after := closer.first.Sub(p.to)
	return verdict{cause: event.StallPrefillInterference, closer: closer,
		evidence: fmt.Sprintf("request %s's first token came %s: %s", closer.id, relative(after, "after it", "before the streams resumed"), how),
		values:   map[string]float64{"first_token_after_ms": ms(after)}}, true
}

// quietBetween reports whether no request of the probe got content
// between from and to: none was streaming then, nor had its first token.
func (d *Detector) quietBetween(from, to time.Time) bool {
	w := interval{from, to}
	if w.dur() <= 0 {
		return true
	}
	for i := range d.requests {
		f := &d.requests[i]
		if w.overlap(f.streamed) > 0 || f.first.After(from) && f.first.Before(to) {
			return false
		}
	}
	return true
}

// prefillTimed: the server's timing puts a request's prefill over at least
// half of the pause.
func (d *Detector) prefillTimed(s *stallGroup) (verdict, bool) {
	p := s.span()
	for i := range d.requests {
		f := &d.requests[i]
		if ov := p.overlap(f.prefill); ov > 0 && 2*ov >= p.dur() {
			return verdict{cause: event.StallPrefillInterference,
				evidence: fmt.Sprintf("the server's timing puts request %s's %s prefill over it", f.id, fmtMS(f.prefill.dur())),
				values:   map[string]float64{"prefill_ms": ms(f.prefill.dur())}}, true
		}
	}
	return verdict{}, false
}

// prefillsPossible counts the probe's requests that may have been in
// prefill during s: past their front end and not yet at their first
// token (or, with the server's timing, prefilling then), and the requests
// sent before it ended that have not reported. It returns the requests in
// flight during s too, and the count never exceeds them, nor MaxInFlight.
func (d *Detector) prefillsPossible(s *stallGroup) (possible, inFlight int) {
	p := s.span()
	for i := range d.requests {
		f := &d.requests[i]
		if f.sent.Before(p.to) && f.end.After(p.from) {
			inFlight++
		}
		if s.has(f.id) {
			continue
		}
		if f.prefill.dur() > 0 {
			if p.overlap(f.prefill) > 0 {
				possible++
			}
			continue
		}
		until := f.first
		if until.IsZero() {
			until = f.end
		}
		if f.pastFrontEnd().Before(p.to) && until.After(p.from) {
			possible++
		}
	}
	for _, sent := range d.inFlight {
		if sent.Before(p.to) {
			possible++
			inFlight++
		}
	}
	if m := d.cfg.MaxInFlight; m > 0 {
		inFlight = min(inFlight, m)
	}
	return min(possible, inFlight), inFlight
}

// waitedThrough reports whether f was past its front end and still waiting
// for its first token through all of s: its prefill may be what s was.
func waitedThrough(f *reqFacts, s *stallGroup) bool {
	return !f.pastFrontEnd().After(s.from) && !f.first.Before(s.to)
}

// decide classifies a run of stalls and makes their markers. A request
// whose first token ended the run's last pause, and that was waiting for
// it through the earlier ones, was prefilling through all of them (chunked
// prefill). Consecutive pauses with one cause make one marker.
func (d *Detector) decide(run []*stallGroup) []event.Marker {
	var kept []*stallGroup
	var verdicts []verdict
	for _, s := range run {
		if d.qualifies(s) {
			kept = append(kept, s)
			verdicts = append(verdicts, d.classify(s))
		}
	}
	// Carry a closing first token back over the pauses it waited through.
	for i := len(kept) - 1; i > 0; i-- {
		c := verdicts[i].closer
		if c == nil {
			continue
		}
		for j := i - 1; j >= 0 && verdicts[j].cause == event.StallUnexplained && waitedThrough(c, kept[j]); j-- {
			verdicts[j] = verdict{cause: event.StallPrefillInterference, closer: c,
				evidence: fmt.Sprintf("request %s was waiting for its first token through it, and that token ended the run of pauses: its prefill ran in them", c.id)}
		}
	}
	var out []event.Marker
	for i := 0; i < len(kept); {
		j := i + 1
		for j < len(kept) && verdicts[j].cause == verdicts[i].cause {
			j++
		}
		// The last pause's evidence names what ended a prefill run; the
		// first's what began any other.
		v := verdicts[i]
		if v.cause == event.StallPrefillInterference {
			v = verdicts[j-1]
		}
		out = append(out, stallMarker(kept[i:j], v))
		i = j
	}
	return out
}

// causeWords names a cause at the start of a marker's message.
var causeWords = map[event.StallCause]string{
	event.StallPrefillInterference: "prefill interference",
	event.StallFrontEndBlock:       "front-end block",
	event.StallProbeStarved:        "probe starved",
	event.StallClientHost:          "client host saturated",
	event.StallUnexplained:         "unexplained pause",
}

// stallMarker makes one marker of consecutive pauses with one cause.
func stallMarker(part []*stallGroup, v verdict) event.Marker {
	first, last := part[0], part[len(part)-1]
	seen := map[string]bool{}
	var ids []string
	var longest, paused time.Duration
	for _, s := range part {
		for _, id := range s.ids {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		longest = max(longest, s.longest)
		paused += s.span().dur()
	}
	whole := last.to.Sub(first.from)
	// The streams' gaps need not line up exactly: the longest gap says how
	// bad the pause was, the overlap how much of it they shared.
	words := causeWords[v.cause]
	if v.label != "" {
		words = v.label
	}
	head := fmt.Sprintf("%s: %d streams paused together for %s (longest gap %s, normal gap %s)",
		words, len(ids), fmtMS(paused), fmtMS(longest), fmtMS(first.itl()))
	if len(part) > 1 {
		head = fmt.Sprintf("%s: %d streams paused %d times in a row over %s (%s of it together, longest gap %s, normal gap %s)",
			words, len(ids), len(part), fmtMS(whole), fmtMS(paused), fmtMS(longest), fmtMS(first.itl()))
	}
	values := map[string]float64{
		"streams":        float64(len(ids)),
		"pauses":         float64(len(part)),
		"gap_ms":         ms(paused),
		"longest_gap_ms": ms(longest),
		"itl_ms":         ms(first.itl()),
	}
	for k, x := range v.values {
		values[k] = x
	}
	return event.Marker{
		Time:       first.from,
		Kind:       event.MarkerStall,
		Source:     "stall-detector",
		Duration:   whole,
		Message:    head + "; " + v.evidence,
		Values:     values,
		RequestIDs: ids,
		Cause:      v.cause,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtMS(d time.Duration) string { return fmt.Sprintf("%.1f ms", ms(d)) }

// relative says d with ahead when it is not negative, else -d with behind:
// "2.0 ms before it", "0.1 ms into it".
func relative(d time.Duration, ahead, behind string) string {
	if d < 0 {
		return fmtMS(-d) + " " + behind
	}
	return fmtMS(d) + " " + ahead
}
