package sim

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// frameWriteTimeout bounds one write to a client, so a client that stops
// reading cannot stall the shared loop forever.
const frameWriteTimeout = 10 * time.Second

// FrameInfo describes one content frame, reported by Config.OnFrame right
// after the frame was flushed to the socket.
type FrameInfo struct {
	RequestID string
	Index     int       // 0-based content frame index within the request
	Tokens    int       // output tokens the frame carries
	At        time.Time // time.Now() right after the flush
	TokenAt   time.Time // end of the engine step that made the frame's token
	// HeldUntil is when the Nagle emulation releases the frame to the
	// client; zero when it went out at once.
	HeldUntil time.Time
}

// onSlot runs on the shared loop when r gets a batch slot, to send a
// stream's headers then (HeadersSlotted).
func (s *Server) onSlot(r *request) {
	if r.fe.finished || r.fe.detached || !r.gen.stream || r.headersSent {
		return
	}
	if err := s.sendHeaders(r, true); err != nil {
		s.lostClient(r, err)
	}
}

// sendHeaders sends a stream's status and headers, flushing them unless the
// next write carries them (HeadersFirstToken).
func (s *Server) sendHeaders(r *request, flush bool) error {
	h := r.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	if s.cfg.ServerTiming {
		h.Set(ServerTimingHeader, headerTiming(r, time.Now()))
	}
	r.w.WriteHeader(http.StatusOK)
	r.headersSent = true
	if !flush {
		return nil
	}
	err := r.rc.Flush()
	r.headersAt = time.Now()
	if err != nil {
		return fmt.Errorf("flush headers to client: %w", err)
	}
	return nil
}

// onToken runs on the shared loop for every generated token: it detokenizes
// the token and, for a stream, frames, writes and flushes it.
func (s *Server) onToken(ev tokenEvent) {
	r := ev.req
	fe := &r.fe
	if fe.finished {
		return
	}
	if r.fault.Error && ev.index == r.fault.ErrorAfter {
		s.failGeneration(r)
		return
	}
	pick := time.Now()
	fe.tokens++
	fe.tokenTimes = append(fe.tokenTimes, ev.at)
	if ev.index == 0 {
		fe.firstPick = pick
		s.m.ttft.Observe(pick.Sub(r.arrival).Seconds())
	} else {
		s.m.itl.Observe(ev.at.Sub(fe.tokenTimes[len(fe.tokenTimes)-2]).Seconds())
	}
	fe.lastPick = pick

	text, raw := s.tokenText(r, ev.index)
	pauseFrom(pick, s.prof.DetokenizePerToken)
	detokEnd := time.Now()
	fe.detokTotal += detokEnd.Sub(pick)
	if ev.index == 0 {
		fe.firstDetokEnd = detokEnd
	}
	fe.lastDetokEnd = detokEnd

	switch {
	case !r.gen.stream:
		if raw != "" {
			text = raw
		}
		fe.text.WriteString(text)
		if ev.last {
			s.finishNonStream(r)
		}
	case fe.detached:
		if ev.last {
			s.finishDetached(r)
		}
	case s.writeContent(r, ev, text, raw, detokEnd) && ev.last:
		s.finishStream(r)
	}
}

// tokenText returns output token i's text, or the placeholder and raw bytes
// when the split-utf8 fault writes it.
func (s *Server) tokenText(r *request, i int) (text, raw string) {
	if r.fault.SplitUTF8 && r.target >= 2 {
		k := r.target/2 - 1
		first, second := splitUTF8()
		switch i {
		case k:
			return rawPlaceholder, first
		case k + 1:
			return rawPlaceholder, second
		}
	}
	return generatedWord(s.cfg.Seed, r.seq, i), ""
}

// writeContent frames and sends one content token, applying the stream
// faults. It reports false when the request ended here.
func (s *Server) writeContent(r *request, ev tokenEvent, text, raw string, detokEnd time.Time) bool {
	fe := &r.fe
	f := r.fault
	if f.Reset && fe.frames == f.ResetAfter {
		s.resetConn(r)
		return false
	}
	var buf []byte
	if f.Malformed && fe.frames == f.MalformedAfter {
		buf = append(buf, r.malformedEvent()...)
	}
	var err error
	if buf, err = r.appendContent(buf, ev.index, text, raw, f.Oversized && ev.index == r.target/2); err != nil {
		s.abortOnLoop(r, err)
		return false
	}
	// Framing costs FramingPerFrame including the write and flush: top the
	// encoding up to the nominal cost less what writes have recently taken.
	pauseFrom(detokEnd, s.prof.FramingPerFrame-s.writeEWMA)
	wstart := time.Now()
	if err := s.send(r, buf); err != nil {
		s.lostClient(r, err)
		return false
	}
	flushed := time.Now()
	s.writeEWMA += (flushed.Sub(wstart) - s.writeEWMA) / 8
	fe.frames++
	fe.framingTotal += flushed.Sub(detokEnd)
	if ev.index == 0 {
		fe.firstFlush = flushed
	}
	fe.lastFlush = flushed
	frame := FrameInfo{RequestID: r.id, Index: fe.frames - 1, Tokens: 1, At: flushed, TokenAt: ev.at}
	if r.conn != nil {
		frame.HeldUntil = r.conn.heldUntil()
	}
	if !frame.HeldUntil.IsZero() {
		fe.held = append(fe.held, HeldFrame{Index: frame.Index, HeldUs: frame.HeldUntil.Sub(flushed).Microseconds()})
	}
	if s.cfg.OnFrame != nil {
		s.cfg.OnFrame(frame)
	}
	return true
}

// send writes b to r's stream and flushes it, sending the headers first if
// they are still due (HeadersFirstToken: in the same write). In Nagle mode
// it writes an SSE event in two pieces, its lines and then the blank line
// that ends it, as servers that meet delayed-ACK stalls do.
func (s *Server) send(r *request, b []byte) error {
	if !r.headersSent {
		_ = s.sendHeaders(r, false) // flushed with b
		defer func() { r.headersAt = time.Now() }()
	}
	if s.cfg.Nagle && len(b) > 1 {
		if err := s.write(r, b[:len(b)-1]); err != nil {
			return err
		}
		b = b[len(b)-1:]
	}
	return s.write(r, b)
}

func (s *Server) write(r *request, b []byte) error {
	_ = r.rc.SetWriteDeadline(time.Now().Add(frameWriteTimeout)) // not every writer supports deadlines
	if _, err := r.w.Write(b); err != nil {
		return fmt.Errorf("write to client: %w", err)
	}
	if err := r.rc.Flush(); err != nil {
		return fmt.Errorf("flush to client: %w", err)
	}
	return nil
}

// finishStream sends the finish chunk, the usage chunk if asked for (the
// truth rides on the last of them) and [DONE].
func (s *Server) finishStream(r *request) {
	fe := &r.fe
	f := r.fault
	if f.Reset && f.ResetAfter >= fe.frames {
		s.resetConn(r)
		return
	}
	if f.Error { // after more tokens than were generated: instead of the finish
		s.failGeneration(r)
		return
	}
	fe.finishReason = r.finishReason
	var buf []byte
	if f.Malformed && f.MalformedAfter >= fe.frames {
		buf = append(buf, r.malformedEvent()...)
	}
	et := s.times(r)
	truth := s.truthOf(r, et)
	var truthRef *Truth
	if r.wantTruth {
		truthRef = &truth
	}
	buf, err := r.appendEnd(buf, s.promptDetails(et), truthRef)
	if err == nil {
		if s.cfg.ServerTiming {
			setTrailerTiming(r.w, truth)
		}
		err = s.send(r, buf)
	}
	if err != nil {
		s.abortOnLoop(r, err)
		return
	}
	s.finalize(r, et, truth, true)
}

// promptDetails is the usage's prompt_tokens_details: present with the
// prefix cache on, as vLLM reports it.
func (s *Server) promptDetails(et engineTimes) *tokensDetails {
	if s.cfg.PrefixCacheBlocks == 0 {
		return nil
	}
	return &tokensDetails{CachedTokens: et.cachedTokens}
}

// finishNonStream finalizes a non-streaming request; its handler writes the
// response once done is closed.
func (s *Server) finishNonStream(r *request) {
	if r.fault.Error {
		s.failGeneration(r)
		return
	}
	r.fe.finishReason = r.finishReason
	et := s.times(r)
	r.fe.details = s.promptDetails(et)
	s.finalize(r, et, s.truthOf(r, et), true)
}

// finishDetached finalizes a request whose client went away but that the
// server generated to the end anyway.
func (s *Server) finishDetached(r *request) {
	r.fe.finishReason = r.finishReason
	et := s.times(r)
	s.finalize(r, et, s.truthOf(r, et), true)
}

// generationError is the error of a generation that failed on the server,
// as vLLM reports one.
func generationError() *apiError {
	return &apiError{Status: http.StatusInternalServerError, Message: "Internal server error (injected fault)",
		Type: "InternalServerError", Code: http.StatusInternalServerError}
}

// failGeneration ends r as a failed generation (the error-after fault): the
// engine drops it, and a stream, whose 200 status is already out, gets an
// error event and then [DONE], as vLLM and SGLang send (the Messages API:
// an error event, the stream's end); the handler answers
// a non-streaming request with a 500. Runs on the loop.
func (s *Server) failGeneration(r *request) {
	fe := &r.fe
	r.aborted.Store(true)
	s.kick()
	fe.finishReason = "error"
	et := s.times(r)
	truth := s.truthOf(r, et)
	if r.gen.stream && !fe.detached {
		var truthRef *Truth
		if r.wantTruth {
			truthRef = &truth
		}
		b, err := r.errorEvent(truthRef)
		if err == nil {
			err = s.send(r, b)
		}
		if err != nil && fe.writeErr == nil {
			fe.writeErr = err
		}
	}
	s.finalize(r, et, truth, false)
}

// resetConn closes the client connection abruptly: hijacked, with linger 0,
// so the client sees a reset rather than a clean end. Where hijacking is not
// possible (HTTP/2), the handler aborts the response instead.
func (s *Server) resetConn(r *request) {
	r.fe.reset = true
	conn, _, err := r.rc.Hijack()
	if err != nil {
		r.fe.hijackFailed = true
	} else {
		if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
	s.abortOnLoop(r, errors.New("connection reset by fault"))
}

// lostClient handles a failed write to r's client: the request is aborted,
// or with Config.KeepAbandoned it runs on without its client. Runs on the loop.
func (s *Server) lostClient(r *request, err error) {
	if s.cfg.KeepAbandoned {
		s.detachOnLoop(r, err)
		return
	}
	s.abortOnLoop(r, err)
}

// detachOnLoop stops writing to r's client but keeps r generating
// (Config.KeepAbandoned). Runs on the loop.
func (s *Server) detachOnLoop(r *request, cause error) {
	fe := &r.fe
	if fe.finished || fe.detached {
		return
	}
	fe.detached = true
	if cause != nil && fe.writeErr == nil {
		fe.writeErr = cause
	}
}

// detach is detachOnLoop from r's handler, whose client is gone; it returns
// once the loop will not touch r's ResponseWriter again.
func (s *Server) detach(r *request) {
	if !s.front.do(func() { s.detachOnLoop(r, errors.New("client gone")) }) {
		<-s.front.done // the loop stopped; it writes nothing more
	}
}

// abortOnLoop ends a request that will not complete: the engine drops it and
// no more frames are written. Runs on the loop.
func (s *Server) abortOnLoop(r *request, cause error) {
	fe := &r.fe
	if fe.finished {
		return
	}
	r.aborted.Store(true)
	s.kick()
	if cause != nil && fe.writeErr == nil {
		fe.writeErr = cause
	}
	fe.finishReason = "abort"
	et := s.times(r)
	s.finalize(r, et, s.truthOf(r, et), false)
}

// finalize records a finished request once: metrics, span, OnFinish, and
// wakes its handler. Runs on the loop.
func (s *Server) finalize(r *request, et engineTimes, truth Truth, ok bool) {
	fe := &r.fe
	fe.finished = true
	fe.truth = truth
	s.m.success.WithLabelValues(fe.finishReason).Inc()
	if ok && !et.firstToken.IsZero() {
		s.m.e2e.Observe(fe.lastPick.Sub(r.arrival).Seconds())
		s.m.queue.Observe(et.scheduled.Sub(et.queued).Seconds())
		s.m.prefill.Observe(et.firstToken.Sub(et.scheduled).Seconds())
		decode := et.lastToken.Sub(et.firstToken)
		s.m.decode.Observe(decode.Seconds())
		s.m.inference.Observe(et.lastToken.Sub(et.scheduled).Seconds())
		if fe.tokens > 1 {
			s.m.tpot.Observe(decode.Seconds() / float64(fe.tokens-1))
		}
		s.phases.record(r.background, et.scheduled.Sub(et.queued), et.firstToken.Sub(et.scheduled), decode,
			fe.lastPick.Sub(r.arrival), r.promptTokens, fe.tokens)
	}
	if s.tr != nil {
		st := spanTimes{arrival: r.arrival, end: time.Now(), promptTokens: r.promptTokens, completionToken: fe.tokens}
		if !fe.firstPick.IsZero() {
			st.ttft = fe.firstPick.Sub(r.arrival)
			st.e2e = fe.lastPick.Sub(r.arrival)
		}
		if !et.scheduled.IsZero() {
			st.queue = et.scheduled.Sub(et.queued)
		}
		if !et.firstToken.IsZero() {
			st.prefill = et.firstToken.Sub(et.scheduled)
			st.decode = et.lastToken.Sub(et.firstToken)
			st.inference = et.lastToken.Sub(et.scheduled)
		}
		if r.gen.maxTokensSet {
			st.maxTokens = r.gen.maxTokens
		}
		s.tr.record(r.traceCtx, r.id, st)
	}
	if s.pd != nil {
		s.pd.forget(r)
	}
	if s.cfg.OnFinish != nil && !r.background {
		s.cfg.OnFinish(truth)
	}
	close(r.done)
}

// abort ends r from its handler's goroutine (client gone, server draining)
// and returns once the loop will not touch r's ResponseWriter again.
func (s *Server) abort(r *request) {
	if !s.front.do(func() { s.abortOnLoop(r, errors.New("client gone or server stopping")) }) {
		<-s.front.done // the loop stopped; it writes nothing more
	}
}

// writeNonStream writes a finished non-streaming response.
func (s *Server) writeNonStream(w http.ResponseWriter, r *request) {
	var truth *Truth
	if r.wantTruth {
		truth = &r.fe.truth
	}
	body, err := r.nonStreamBody(truth)
	if err != nil {
		writeError(w, statusError(http.StatusInternalServerError, err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
