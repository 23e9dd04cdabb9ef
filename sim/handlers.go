package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
)

// RequestIDHeader carries the client's request id; the server echoes it.
const RequestIDHeader = "X-Request-Id"

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.loading(s.method(http.MethodPost, s.handleGenerate(apiChat))))
	mux.HandleFunc("/v1/completions", s.loading(s.method(http.MethodPost, s.handleGenerate(apiCompletions))))
	mux.HandleFunc("/v1/responses", s.loading(s.method(http.MethodPost, s.handleGenerate(apiResponses))))
	mux.HandleFunc(MessagesPath, s.loading(s.method(http.MethodPost, s.handleGenerate(apiMessages))))
	mux.HandleFunc("/v1/models", s.loading(s.method(http.MethodGet, s.handleModels)))
	mux.HandleFunc("/health", s.loading(s.method(http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })))
	mux.HandleFunc("/tokenize", s.loading(s.method(http.MethodPost, s.handleTokenize)))
	metrics := s.m.handler()
	mux.HandleFunc("/metrics", s.method(http.MethodGet, metrics.ServeHTTP))
	mux.HandleFunc(BackgroundTruthPath, s.method(http.MethodGet, s.handleBackgroundTruth))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, statusError(http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
	})
	return s.recoverer(mux)
}

// loading answers 503 until the model has loaded (Config.Loading), with the
// error llama-server sends meanwhile.
func (s *Server) loading(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.loaded:
			h(w, r)
		default:
			writeErrorFor(w, r.URL.Path, &apiError{Status: http.StatusServiceUnavailable, Message: "Loading model",
				Type: "unavailable_error", Code: http.StatusServiceUnavailable})
		}
	}
}

func (s *Server) method(m string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", m)
			writeErrorFor(w, r.URL.Path, statusError(http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; use %s", r.Method, m)))
			return
		}
		h(w, r)
	}
}

// recoverer is the last line of defence: input is validated first, but a
// panic must never take the server down.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v) // the deliberate abort of a response
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeErrorFor(w, r.URL.Path, statusError(http.StatusInternalServerError, "internal server error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.cfg.Model, "object": "model", "created": 0, "owned_by": "latscope-sim",
			"root": s.cfg.Model, "max_model_len": s.prof.MaxModelLen,
			// Says when a stream's headers leave, so a client can tell
			// whether waiting for them includes the queue.
			"latscope_headers": string(s.cfg.Headers),
		}},
	})
}

// handleTokenize answers vLLM's /tokenize with the server's own token model.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e == nil {
		var req tokenizeRequest
		if e = decodeJSON(body, &req); e == nil {
			e = s.checkModel(req.Model)
			if e == nil {
				var ids []int
				if ids, e = tokenizeIDs(req); e == nil {
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(map[string]any{"count": len(ids), "max_model_len": s.prof.MaxModelLen, "tokens": ids})
					return
				}
			}
		}
	}
	writeError(w, e)
}

func tokenizeIDs(req tokenizeRequest) ([]int, *apiError) {
	switch {
	case req.Messages != nil && req.Prompt != nil:
		return nil, badRequest("", "give prompt or messages, not both")
	case req.Messages != nil:
		msgs := make([]message, 0, len(req.Messages))
		for i, m := range req.Messages {
			text, err := messageText(m.Content)
			if err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %v", i, err)
			}
			msgs = append(msgs, message{Role: m.Role, Text: text})
		}
		return chatIDs(msgs, req.AddGenerationPrompt == nil || *req.AddGenerationPrompt), nil
	case req.Prompt != nil:
		var g generation
		if e := g.setPrompt(req.Prompt); e != nil {
			return nil, e
		}
		if g.promptIDs != nil {
			return g.promptIDs, nil
		}
		return tokenIDs(nil, g.prompt), nil
	}
	return nil, badRequest("prompt", "prompt or messages is required")
}

func (s *Server) checkModel(model string) *apiError {
	if model != "" && model != s.cfg.Model {
		e := statusError(http.StatusNotFound, fmt.Sprintf("the model `%s` does not exist", model))
		e.Param = "model"
		return e
	}
	return nil
}

// validRequestID accepts 1-256 visible ASCII characters, so the id is safe
// to echo in a header.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// handleGenerate serves /v1/chat/completions, /v1/completions,
// /v1/responses and /v1/messages; its errors take the shape of the API.
func (s *Server) handleGenerate(api apiKind) http.HandlerFunc {
	return func(w http.ResponseWriter, hr *http.Request) {
		arrival := time.Now()
		seq := s.seq.Add(1)
		id := hr.Header.Get(RequestIDHeader)
		if id == "" {
			id = fmt.Sprintf("%s-%d", s.idPrefix, seq)
		} else if !validRequestID(id) {
			writeErrorFor(w, hr.URL.Path, badRequest(RequestIDHeader, "%s must be 1-256 visible ASCII characters", RequestIDHeader))
			return
		}
		w.Header().Set(RequestIDHeader, id)
		select {
		case <-s.draining:
			writeErrorFor(w, hr.URL.Path, statusError(http.StatusServiceUnavailable, "server is shutting down"))
			return
		default:
		}
		r, e := s.admit(w, hr, api, id, seq, arrival)
		if e != nil {
			if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable || e.Status == StatusOverloaded {
				w.Header().Set("Retry-After", "1")
			}
			writeErrorFor(w, hr.URL.Path, e)
			return
		}
		if r.fault.SlowHeaders > 0 {
			r.faultStart = time.Now()
			if !sleepCtx(hr.Context(), r.fault.SlowHeaders) {
				return
			}
			r.faultEnd = time.Now()
		}
		if r.gen.stream && s.cfg.Headers == HeadersAtOnce {
			if err := s.sendHeaders(r, true); err != nil {
				return
			}
		}
		s.submit(r)
		if !s.await(hr.Context(), r) {
			return // the server keeps generating for the gone client
		}
		if r.fe.hijackFailed {
			// Hijacking failed (HTTP/2): abort the response instead.
			panic(http.ErrAbortHandler)
		}
		if r.gen.stream {
			s.endStream(w, hr, r)
			return
		}
		switch {
		case r.fe.finishReason == "abort":
		case r.fault.Reset:
			s.resetNonStream(r)
		case r.fe.finishReason == "error":
			writeErrorFor(w, hr.URL.Path, generationError())
		default:
			s.writeNonStream(w, r)
		}
	}
}

// await waits for r to finish, or ends it early: aborted if the server
// drains, or if its client goes away (vLLM's way) unless the server keeps
// working on abandoned requests. It reports false when r was left to run on
// without its client; the loop then writes nothing more to it, and neither
// may the handler.
func (s *Server) await(ctx context.Context, r *request) bool {
	select {
	case <-r.done:
	case <-ctx.Done():
		r.goneAt.Store(time.Now().UnixNano())
		if s.cfg.KeepAbandoned {
			s.detach(r)
			return false
		}
		s.abort(r)
	case <-s.draining:
		s.abort(r)
	}
	return true
}

// endStream finishes a stream's response once the loop is done with it.
func (s *Server) endStream(w http.ResponseWriter, hr *http.Request, r *request) {
	if !r.headersSent && !r.fe.reset {
		// Ended before its headers went out (slotted or first-token headers):
		// the client can still be told why.
		writeErrorFor(w, hr.URL.Path, statusError(http.StatusServiceUnavailable, "request ended before its response started"))
		return
	}
	if s.cfg.CloseAfterStream && r.conn != nil {
		r.conn.refuseNextRequest()
	}
}

// admit parses, validates and tokenizes a generation request. As in Python
// stacks, the body is parsed and validated on the shared loop; by default the
// same loop job also tokenizes the prompt, so a burst of long prompts blocks
// the loop for all of their tokenization. With a tokenizer pool the
// tokenization runs on the pool instead.
func (s *Server) admit(w http.ResponseWriter, hr *http.Request, api apiKind, id string, seq uint64, arrival time.Time) (*request, *apiError) {
	body, e := readBody(w, hr)
	if e != nil {
		return nil, e
	}
	r := &request{
		id:        id,
		seq:       seq,
		wantTruth: hr.Header.Get(TruthHeader) == "1",
		// The simulator's own traffic (Config.Background).
		background: isBackground(hr.Context()),
		arrival:    arrival,
		created:    arrival.Unix(),
		traceCtx:   context.Background(),
		w:          w,
		rc:         http.NewResponseController(w),
		conn:       connOf(hr.Context()),
		done:       make(chan struct{}),
		bodyRead:   time.Now(),
	}
	if ns, err := strconv.ParseInt(hr.Header.Get(ProxyStartHeader), 10, 64); err == nil && ns > 0 {
		r.proxyStart = time.Unix(0, ns)
	}
	if s.tr != nil {
		r.traceCtx = s.tr.extract(hr.Header)
	}
	rng := s.requestRand(seq)
	parse := func() *apiError {
		r.parseStart = time.Now()
		defer func() { r.httpEnd = time.Now() }()
		var g *generation
		var e *apiError
		switch api {
		case apiChat:
			g, e = parseChat(body)
		case apiResponses:
			g, e = parseResponses(body)
		case apiMessages:
			g, e = parseMessages(body)
		default:
			g, e = parseCompletion(body)
		}
		if e != nil {
			return e
		}
		if g.chat {
			// A reasoning model thinks before it answers in chat (and
			// Responses and Messages) streams only.
			g.reasoning = s.cfg.Reasoning
		}
		if e := s.checkModel(g.model); e != nil {
			return e
		}
		g.model = s.cfg.Model
		r.gen = g
		fault, e := s.faultFor(hr, rng.Float64())
		if e != nil {
			return e
		}
		if fault.Status != 0 {
			return statusError(fault.Status, fmt.Sprintf("injected fault: status %d", fault.Status))
		}
		r.fault = fault
		// The parsing cost covers reading the body too.
		pauseFrom(r.parseStart, s.prof.httpCost(len(body))-r.bodyRead.Sub(arrival))
		return nil
	}
	var perr *apiError
	ran := false
	if s.tokPool == nil {
		ran = s.front.do(func() {
			if perr = parse(); perr == nil {
				r.tokSubmit, r.tokOnLoop = time.Now(), true
				s.tokenizeJob(r)
			}
		})
	} else if ran = s.front.do(func() { perr = parse() }); ran && perr == nil {
		r.tokSubmit = time.Now()
		ran = s.tokPool.do(func() { s.tokenizeJob(r) })
	}
	if !ran {
		return nil, statusError(http.StatusServiceUnavailable, "server is shutting down")
	}
	if perr != nil {
		return nil, perr
	}
	if e := s.checkLength(r); e != nil {
		return nil, e
	}
	s.chooseLength(r, rng.Float64())
	return r, nil
}

// tokenizeJob tokenizes r's prompt; it runs on the shared loop or a
// tokenizer-pool worker.
func (s *Server) tokenizeJob(r *request) {
	r.tokStart = time.Now()
	n := r.gen.promptTokens()
	if s.cfg.PrefixCacheBlocks > 0 {
		r.blockHashes = blockHashes(r.gen.promptTokenIDs())
	}
	pauseFrom(r.tokStart, s.prof.tokenizeCost(n))
	r.promptTokens = n
	r.tokEnd = time.Now()
}

// checkLength applies vLLM's context-length checks after tokenization.
func (s *Server) checkLength(r *request) *apiError {
	limit := s.prof.MaxModelLen
	p := r.promptTokens
	if p >= limit {
		return badRequest("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens.", limit, p)
	}
	if r.gen.maxTokensSet && p+r.gen.maxTokens > limit {
		return badRequest("max_tokens", "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the input, %d for the completion).",
			limit, p+r.gen.maxTokens, p, r.gen.maxTokens)
	}
	if !r.gen.maxTokensSet {
		r.gen.maxTokens = min(r.gen.maxTokens, limit-p)
		r.gen.minTokens = min(r.gen.minTokens, r.gen.maxTokens)
	}
	return nil
}

// chooseLength sets how many tokens r generates: max_tokens with ignore_eos,
// else a seeded "EOS" point, never before min_tokens.
func (s *Server) chooseLength(r *request, u float64) {
	maxT := r.gen.maxTokens
	r.target, r.finishReason = maxT, "length"
	if !r.gen.ignoreEOS {
		// EOS lands uniformly in [1, 2·max_tokens]: about half the answers stop early.
		eos := 1 + int(u*float64(2*maxT))
		if eos < maxT {
			r.target = max(eos, r.gen.minTokens, 1)
			if r.target < maxT {
				r.finishReason = "stop"
			}
		}
	}
	if r.fault.Stall > 0 && r.target >= 2 {
		r.stallAt = r.target / 2
	}
}

// faultFor combines the request's fault header with the configured fault,
// drawn with probability FaultRate (u is the request's uniform draw).
func (s *Server) faultFor(hr *http.Request, u float64) (Fault, *apiError) {
	var f Fault
	if !s.cfg.Fault.IsZero() {
		rate := s.cfg.FaultRate
		if rate == 0 {
			rate = 1
		}
		if u < rate {
			f = s.cfg.Fault
		}
	}
	if spec := hr.Header.Get(FaultHeader); spec != "" {
		hf, err := ParseFault(spec)
		if err != nil {
			return Fault{}, badRequest(FaultHeader, "%s: %v", FaultHeader, err)
		}
		f = f.merge(hf)
	}
	return f, nil
}

// resetNonStream resets the connection instead of answering.
func (s *Server) resetNonStream(r *request) {
	conn, _, err := r.rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// sleepCtx sleeps d or until ctx ends; it reports whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
