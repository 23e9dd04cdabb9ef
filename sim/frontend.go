package sim

import (
	"errors"
	"fmt"
	"net"
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
}

// onToken runs on the shared loop for every generated token: it detokenizes
// the token and, for a stream, frames, writes and flushes it.
func (s *Server) onToken(ev tokenEvent) {
	r := ev.req
	fe := &r.fe
	if fe.finished {
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

	if !r.gen.stream {
		if raw != "" {
			text = raw
		}
		fe.text.WriteString(text)
		if ev.last {
			s.finishNonStream(r)
		}
		return
	}
	if !s.writeContent(r, ev.index, text, raw, detokEnd) {
		return
	}
	if ev.last {
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
func (s *Server) writeContent(r *request, index int, text, raw string, detokEnd time.Time) bool {
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
	if index == 0 && r.gen.chat {
		if buf, err = appendEvent(buf, r.roleChunk(), ""); err != nil {
			s.abortOnLoop(r, err)
			return false
		}
	}
	c := r.contentChunk(text)
	if f.Oversized && index == r.target/2 {
		c.Padding = padding(oversizedPadding)
	}
	if buf, err = appendEvent(buf, c, raw); err != nil {
		s.abortOnLoop(r, err)
		return false
	}
	// Framing costs FramingPerFrame including the write and flush: top the
	// encoding up to the nominal cost less what writes have recently taken.
	pauseFrom(detokEnd, s.prof.FramingPerFrame-s.writeEWMA)
	wstart := time.Now()
	if err := s.write(r, buf); err != nil {
		s.abortOnLoop(r, err)
		return false
	}
	flushed := time.Now()
	s.writeEWMA += (flushed.Sub(wstart) - s.writeEWMA) / 8
	fe.frames++
	fe.framingTotal += flushed.Sub(detokEnd)
	if index == 0 {
		fe.firstFlush = flushed
	}
	fe.lastFlush = flushed
	if s.cfg.OnFrame != nil {
		s.cfg.OnFrame(FrameInfo{RequestID: r.id, Index: fe.frames - 1, Tokens: 1, At: flushed})
	}
	return true
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
	fe.finishReason = r.finishReason
	var buf []byte
	if f.Malformed && f.MalformedAfter >= fe.frames {
		buf = append(buf, r.malformedEvent()...)
	}
	et := s.eng.times(r)
	truth := buildTruth(r, et)
	var truthRef *Truth
	if r.wantTruth {
		truthRef = &truth
	}
	fin := r.finishChunk(r.finishReason)
	if !r.gen.includeUsage {
		fin.Truth = truthRef
	}
	var err error
	if buf, err = appendEvent(buf, fin, ""); err == nil && r.gen.includeUsage {
		u := r.newChunk()
		u.Usage = r.usage()
		u.Truth = truthRef
		buf, err = appendEvent(buf, u, "")
	}
	if err == nil {
		buf = append(buf, "data: [DONE]\n\n"...)
		err = s.write(r, buf)
	}
	if err != nil {
		s.abortOnLoop(r, err)
		return
	}
	s.finalize(r, et, truth, true)
}

// finishNonStream finalizes a non-streaming request; its handler writes the
// response once done is closed.
func (s *Server) finishNonStream(r *request) {
	r.fe.finishReason = r.finishReason
	et := s.eng.times(r)
	s.finalize(r, et, buildTruth(r, et), true)
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
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
	s.abortOnLoop(r, errors.New("connection reset by fault"))
}

// abortOnLoop ends a request that will not complete: the engine drops it and
// no more frames are written. Runs on the loop.
func (s *Server) abortOnLoop(r *request, cause error) {
	fe := &r.fe
	if fe.finished {
		return
	}
	r.aborted.Store(true)
	s.eng.kick()
	if cause != nil && fe.writeErr == nil {
		fe.writeErr = cause
	}
	fe.finishReason = "abort"
	et := s.eng.times(r)
	s.finalize(r, et, buildTruth(r, et), false)
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
	if s.cfg.OnFinish != nil {
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
