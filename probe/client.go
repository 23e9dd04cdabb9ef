package probe

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/nagle"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	BaseURL string      // server root, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted for the dialects whose path starts with /v1)
	Dialect string      // one of Dialects()
	Model   string      // model name sent in the body; required by the Ollama dialects
	APIKey  string      // sent as Authorization: Bearer when set (anthropic-messages: as x-api-key)
	Headers http.Header // extra request headers

	// HTTPClient sends the requests; nil means a transport tuned for many
	// concurrent streams (see NewTransport).
	HTTPClient *http.Client
	// MaxEventBytes bounds one stream event; 0 means DefaultMaxEventBytes.
	MaxEventBytes int
	// Timeout bounds one request from send to end of stream; 0 means none
	// (the caller's context still applies).
	Timeout time.Duration
}

// MaxEventBytesLimit is the largest MaxEventBytes a Client accepts: far
// above any real event, and small enough that sums of sizes cannot wrap.
const MaxEventBytesLimit = 1 << 30

// Client executes probe requests in one dialect against one server. It is
// safe for concurrent use.
type Client struct {
	target  string // BaseURL without credentials, for the record
	url     string // full request URL
	model   string
	header  http.Header // sent with every request: Headers and Authorization
	secrets redactor    // header values to keep out of error messages
	limit   int
	timeout time.Duration
	d       dialect
	hc      *http.Client
	fresh   *http.Client // hc on a new connection every time, for a stale connection's retry
	readers sync.Pool    // *bufio.Reader, reused across requests
}

var _ Doer = (*Client)(nil)

// NewClient validates cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	d, err := dialectByName(cfg.Dialect)
	if err != nil {
		return nil, err
	}
	u, err := ParseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(u.String(), "/")
	if strings.HasPrefix(d.path(), "/v1/") {
		base = strings.TrimSuffix(base, "/v1") // the dialect's path has it
	}
	if _, ok := d.(ollamaDialect); ok && cfg.Model == "" {
		return nil, fmt.Errorf("dialect %s needs a model name", cfg.Dialect)
	}
	switch {
	case cfg.MaxEventBytes < 0 || cfg.MaxEventBytes > MaxEventBytesLimit:
		return nil, fmt.Errorf("max event bytes %d: want 1 to %d (0 for the default)", cfg.MaxEventBytes, MaxEventBytesLimit)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("request timeout %s: want 0 (none) or more", cfg.Timeout)
	}
	header, err := clientHeader(d, cfg.APIKey, cfg.Headers)
	if err != nil {
		return nil, err
	}
	hc := NewHTTPClient(nil)
	if cfg.HTTPClient != nil {
		hc = withRedirectPolicy(cfg.HTTPClient)
	}
	limit := cfg.MaxEventBytes
	if limit == 0 {
		limit = DefaultMaxEventBytes
	}
	return &Client{
		target:  event.RedactURL(cfg.BaseURL),
		url:     base + d.path(),
		model:   cfg.Model,
		header:  header,
		secrets: newRedactor(header),
		limit:   limit,
		timeout: cfg.Timeout,
		d:       d,
		hc:      hc,
		fresh:   freshConnections(hc),
		readers: sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamBufferBytes) }},
	}, nil
}

// freshConnections returns hc as a client whose every request dials a new
// connection, closed after its response, for the one retry of a request
// that went out on a connection the server had closed: from hc's pool the
// retry could take another such connection (llama-server leaves one behind
// after every stream, so with several streams the pool holds several). A
// transport that is not an *http.Transport cannot be told to dial; the
// retry then takes its chances with hc.
func freshConnections(hc *http.Client) *http.Client {
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, ok := rt.(*http.Transport)
	if !ok {
		return hc
	}
	fresh := tr.Clone()
	fresh.DisableKeepAlives = true
	c := *hc
	c.Transport = fresh
	return &c
}

// AuthHeader returns the headers every call to the server carries: extra,
// plus Authorization: Bearer apiKey when apiKey is set. It checks that each
// can be sent, without ever showing a value in its errors.
func AuthHeader(apiKey string, extra http.Header) (http.Header, error) {
	h := make(http.Header, len(extra)+1)
	for name, values := range extra {
		for _, v := range values {
			if err := CheckHeader(name, v); err != nil {
				return nil, err
			}
			h.Add(name, v)
		}
	}
	if apiKey != "" {
		if err := CheckHeader("Authorization", apiKey); err != nil {
			return nil, errors.New("the API key holds a control character; it is not shown")
		}
		h.Set("Authorization", "Bearer "+apiKey)
	}
	return h, nil
}

// CloseIdleConnections closes the client's idle connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Dialect returns the client's dialect name.
func (c *Client) Dialect() string { return c.d.name() }

// drainLimit and drainWait bound what Do reads after the end marker so the
// connection can be reused; neither counts in any measurement.
const (
	drainLimit = 64 << 10
	drainWait  = time.Second
)

// Do sends one request and returns its complete record. It never returns
// nil, always sets exactly one Outcome, always closes the body and leaves
// no goroutine behind.
func (c *Client) Do(ctx context.Context, spec RequestSpec) *event.Request {
	rec, _ := c.doNoted(ctx, spec)
	return rec
}

var _ notingDoer = (*Client)(nil)

// doNoted is Do that also returns what the load generator should know
// beyond the record.
func (c *Client) doNoted(ctx context.Context, spec RequestSpec) (*event.Request, notes) {
	start := time.Now()
	x := &exchange{c: c, spec: spec, start: start}
	x.rec = &event.Request{
		ID: spec.ID, TraceID: spec.TraceID, Seq: spec.Seq, Worker: spec.Worker,
		Target: c.target, Dialect: c.d.name(), Model: c.model, Warmup: spec.Warmup,
		PromptTokens: spec.PromptTokens, TargetOutputTokens: spec.OutputTokens,
		Intended: spec.Intended, Start: start,
	}
	// A request that starts before its schedule (the pacer never does this)
	// counts from its real start, so the stages still cover the TTFT.
	if spec.Intended.IsZero() || start.Before(spec.Intended) {
		x.rec.Intended = start
	}
	x.lag = start.Sub(x.rec.Intended)
	x.rec.SchedLag = x.lag

	var reqCtx context.Context
	var cancel context.CancelFunc
	if c.timeout > 0 {
		reqCtx, cancel = context.WithTimeoutCause(ctx, c.timeout, errRequestTimeout)
	} else {
		reqCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	if d := spec.AbandonAfter; d > 0 {
		// The user presses stop d after the request was due, whatever
		// has come by then.
		t := time.AfterFunc(max(d-x.lag, 0), func() {
			x.stop.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	x.execute(ctx, reqCtx, cancel)
	x.finish()
	return x.rec, notes{retryAfter: x.retryAfter, reconnected: x.reconnected, answer: x.answer.String()}
}

// exchange is the state of one request: what was sent and what came back.
type exchange struct {
	c     *Client
	spec  RequestSpec
	rec   *event.Request
	start time.Time
	lag   time.Duration // Intended → start

	retryAfter  time.Duration // a 429's, 503's or 529's Retry-After
	reconnected bool          // sent again after a stale connection

	bodyReady time.Time
	trace     *connTrace // the last attempt's
	phases    phases
	headers   time.Time
	rtt       time.Duration // the kernel's round trip on a new connection (0: none)

	ci         chunkInfo // the current event's
	sawEvent   bool
	firstAt    time.Duration // first content chunk, from start
	endAt      time.Duration // end marker, from start
	tokens     int
	usage      bool
	usageOut   int
	usageCache int // the usage's cached prompt tokens
	reasoned   int // reasoning tokens counted from the deltas
	usageReas  int // the usage's reasoning tokens
	answered   bool
	answerAt   time.Duration // first answer chunk, from start
	failed     bool
	batchRead  uint64        // socket read of the current coalesced group
	batchCount int32         // events in that group
	batchFrom  int           // first chunk of that group
	batchAt    time.Duration // arrival of that group, from start

	shape chunkShape // the OpenAI and Anthropic dialects' content chunk shape

	answer strings.Builder // the answer's text, with spec.KeepAnswer
	// stop is set when the probe abandons the request on purpose
	// (spec.AbandonTokens reached, or spec.AbandonAfter's timer).
	stop     atomic.Bool
	closedAt time.Time // when the abandoned stream was closed
}

// errAbandoned ends a stream the probe abandons on purpose.
var errAbandoned = errors.New("abandoned by the probe (--cancel-after)")

// abandoned sets the outcome of a request the probe abandoned: ok is false
// when it was not abandoned.
func (x *exchange) abandoned(err error) bool {
	if !x.stop.Load() && !errors.Is(err, errAbandoned) {
		return false
	}
	if x.closedAt.IsZero() {
		x.closedAt = time.Now()
	}
	x.failed = true
	x.rec.Outcome = event.OutcomeAbandoned
	x.rec.Abandon = &event.Abandon{Rule: x.spec.abandonRule(), At: x.lag + x.closedAt.Sub(x.start)}
	return true
}

// fail sets the outcome once.
func (x *exchange) fail(out event.Outcome, msg string) {
	x.failed = true
	x.rec.Outcome = out
	x.rec.Error = msg
}

// execute sends the request and reads its answer into x.rec; every way it
// fails goes through fail.
func (x *exchange) execute(parent, reqCtx context.Context, cancel context.CancelFunc) {
	resp, ok := x.request(parent, reqCtx)
	if !ok {
		return
	}
	if !x.acceptAnswer(resp) {
		resp.Body.Close()
		return
	}
	x.readAnswer(parent, reqCtx, cancel, resp)
	resp.Body.Close()
	if x.rec.Outcome == event.OutcomeAbandoned {
		// Closing an unfinished body closes its connection: the server
		// sees its client go. The slot's release counts from here.
		x.closedAt = time.Now()
		x.rec.Abandon.At = x.lag + x.closedAt.Sub(x.start)
	}
}

// request builds the body and sends it, once more on a fresh connection
// when the first went out on a stale one, and notes the connection's
// phases. ok is false, with the outcome set, when no answer came.
func (x *exchange) request(parent, reqCtx context.Context) (resp *http.Response, ok bool) {
	c := x.c
	body, err := c.d.body(c.model, x.spec)
	if err != nil {
		x.fail(event.OutcomeMalformed, fmt.Sprintf("build request body: %v", err))
		return nil, false
	}
	x.bodyReady = time.Now()
	resp, err = x.send(reqCtx, c.hc, body)
	if err != nil && x.staleConnection(err, parent, reqCtx) {
		// The server had closed the idle connection the request went out
		// on, before reading it: net/http sends again only idempotent
		// requests, and a completion is a POST. Send it once more, on a
		// new connection; the time lost stays in conn_wait.
		x.reconnected = true
		resp, err = x.send(reqCtx, c.fresh, body)
	}
	x.phases = x.trace.snapshot()
	if sc, ok := x.phases.conn.(*h2StreamConn); ok && err == nil {
		x.phases.wrote = h2Wrote(sc.wrote(), x.phases.wrote)
	}
	// When the headers' bytes reached the host: the latest read of the
	// connection brought them.
	now := time.Now()
	var stamped bool
	x.headers, stamped = kernelArrival(x.phases.conn, now)
	x.spec.lag.read(x.headers, now, stamped)
	if !x.phases.reused && x.phases.conn != nil {
		x.rtt, _ = kernelRTT(tcpConn(x.phases.conn)) // while the connection is surely open
	}
	if err != nil {
		x.sendFailed(parent, reqCtx, resp, err)
		return nil, false
	}
	return resp, true
}

// sendFailed sets the outcome of a request that got no answer to stream:
// cancelled, refused, or (a refused redirect, the one case with both a
// response and an error) a 3xx.
func (x *exchange) sendFailed(parent, reqCtx context.Context, resp *http.Response, err error) {
	if parent.Err() == nil && x.abandoned(err) {
		return
	}
	if out, msg, ok := contextOutcome(parent, reqCtx); ok {
		x.fail(out, msg)
		return
	}
	if resp != nil {
		x.rec.Status = resp.StatusCode
		x.fail(event.OutcomeHTTPStatus, fmt.Sprintf("http %d: %s", resp.StatusCode, describeError(err)))
		return
	}
	out, msg := sendOutcome(err, !x.phases.gotConn.IsZero())
	x.fail(out, x.c.secrets.clean(msg))
}

// acceptAnswer reads the status and headers: false, with the outcome set,
// when the answer is an error status or not a stream.
func (x *exchange) acceptAnswer(resp *http.Response) bool {
	c := x.c
	x.rec.Status = resp.StatusCode
	if st := tgiHeaderTiming(resp.Header); st != nil {
		x.addTiming(st)
	}
	if st := serverTimingOf(resp.Header); st != nil {
		x.addTiming(st)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if retryLater(resp.StatusCode) {
			x.retryAfter = parseRetryAfter(resp.Header, x.headers)
		}
		x.fail(event.OutcomeHTTPStatus, c.secrets.clean(statusError(resp)))
		return false
	}
	if problem := notAStream(resp, c.d.ndjson()); problem != "" {
		x.fail(event.OutcomeMalformed, c.secrets.clean(problem))
		return false
	}
	return true
}

// readAnswer streams the body's events into the record, then drains what
// follows the end marker and reads the trailers.
func (x *exchange) readAnswer(parent, reqCtx context.Context, cancel context.CancelFunc, resp *http.Response) {
	c := x.c
	br := c.readers.Get().(*bufio.Reader)
	defer c.readers.Put(br)
	clock := &readClock{r: resp.Body, conn: x.phases.conn, at: x.headers, lag: x.spec.lag}
	br.Reset(clock)
	defer br.Reset(nil)
	var rd eventReader
	if c.d.ndjson() {
		rd = newNDJSONReader(br, clock, c.limit)
	} else {
		rd = newSSEReader(br, clock, c.limit)
	}
	if err := x.stream(rd); err != nil {
		x.streamFailed(parent, reqCtx, resp.StatusCode, clock.bytes, err)
		return
	}
	x.rec.Outcome = event.OutcomeOK
	// Read what follows the end marker (normally just the chunked-encoding
	// terminator) so the connection goes back to the pool, but never wait
	// long for a server that keeps the stream open.
	t := time.AfterFunc(drainWait, cancel)
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(br, drainLimit))
	// Trailers are known only once the body has ended: a server reports
	// there what it measured after its headers left (Server-Timing).
	if st := serverTimingOf(resp.Trailer); st != nil {
		x.addTiming(st)
	}
}

// streamFailed sets the outcome of a stream that ended with err, after
// bodyBytes bytes of an answer with the given status.
func (x *exchange) streamFailed(parent, reqCtx context.Context, status int, bodyBytes int64, err error) {
	if parent.Err() == nil && x.abandoned(err) {
		return
	}
	if out, msg, ok := contextOutcome(parent, reqCtx); ok {
		x.fail(out, msg)
		return
	}
	if !x.sawEvent && errors.Is(err, io.EOF) {
		// An empty body, or one without a single event (a page served
		// as text/plain): an answer, but not a stream.
		x.fail(event.OutcomeMalformed, fmt.Sprintf("server answered %d without a single stream event (%d bytes of body)", status, bodyBytes))
		return
	}
	out, msg := streamOutcome(err, x.c.d.endMarker())
	x.fail(out, x.c.secrets.clean(msg))
}

// retryLater reports whether a status asks the client to come back later,
// with a Retry-After: 429, 503, and Anthropic's 529 Overloaded.
func retryLater(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == statusOverloaded
}

// minTokenLimit and tokenLimitFactor bound the tokens one stream may carry:
// tokenLimitFactor times what was asked for, and at least minTokenLimit,
// far above any sane output. A server that streams forever without its end
// marker would otherwise make the request keep every chunk until --timeout.
const (
	minTokenLimit    = 1 << 16
	tokenLimitFactor = 4
)

// tokenLimit is the most tokens a stream asked for asked tokens may carry.
func tokenLimit(asked int) int {
	return max(tokenLimitFactor*min(max(asked, 0), maxTokenLength), minTokenLimit)
}

// tooManyTokensError ends a stream that went past its token limit.
type tooManyTokensError struct{ limit int }

func (e *tooManyTokensError) Error() string {
	return fmt.Sprintf("server sent more than %d tokens without ending the stream", e.limit)
}

// send makes one attempt at the request through hc, traced afresh.
func (x *exchange) send(ctx context.Context, hc *http.Client, body []byte) (*http.Response, error) {
	x.trace = &connTrace{}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, x.trace.clientTrace()),
		http.MethodPost, x.c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	x.c.setHeaders(req.Header, x.spec)
	return hc.Do(req)
}

// staleConnection reports whether a failed first attempt went out on a
// reused connection that the server had closed before answering (its
// keep-alive timeout passed as the request arrived): the request was not
// refused, the connection was stale.
func (x *exchange) staleConnection(err error, parent, req context.Context) bool {
	if x.reconnected || parent.Err() != nil || req.Err() != nil || !x.trace.snapshot().reused {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "server closed idle connection")
}

// stream reads events until the end marker. A nil return is a complete
// stream; otherwise a read error, a parse error wrapping errMalformed, a
// *serverEventError or a *tooManyTokensError.
func (x *exchange) stream(rd eventReader) error {
	limit := tokenLimit(x.spec.OutputTokens)
	chunks := make([]event.Chunk, 0, min(max(x.spec.OutputTokens, 0), minTokenLimit))
	defer func() {
		x.closeBatch(chunks)
		x.rec.Chunks = chunks
	}()
	for {
		ev, err := rd.Next()
		if err != nil {
			return err
		}
		// The arrival time is the read's, the same for all the events of
		// one read; take it before any parsing.
		if ev.Read != x.batchRead {
			x.openBatch(chunks, ev)
		}
		at := x.batchAt
		x.batchCount++

		x.ci = chunkInfo{}
		ci := &x.ci // a field, not a local: through the interface call a local would escape
		perr := x.parse(ev.Data, ci)
		if !x.sawEvent {
			x.firstEvent(at, perr)
		}
		if perr != nil {
			return perr
		}
		if ci.serverErr != "" {
			return &serverEventError{msg: ci.serverErr}
		}
		if ci.tokens > 0 {
			if x.tokens+ci.tokens > limit {
				return &tooManyTokensError{limit: limit}
			}
			if len(chunks) == 0 {
				x.firstAt = at
			}
			chunks = append(chunks, event.Chunk{At: at, Tokens: int32(ci.tokens)})
			x.tokens += ci.tokens
			switch {
			case ci.reasoning:
				x.reasoned += ci.tokens
			case !x.answered:
				x.answered, x.answerAt = true, at
			}
			x.rec.ReplacementChars += ci.replacements
			if x.spec.KeepAnswer {
				x.answer.WriteString(ci.answerText())
			}
		}
		if ci.usage {
			x.takeUsage(ci, limit)
		}
		if ci.timing != nil {
			x.addTiming(ci.timing)
		}
		if ci.end {
			x.endAt = at
			return nil
		}
		if n := x.spec.AbandonTokens; n > 0 && x.tokens >= n {
			return errAbandoned
		}
	}
}

// openBatch closes the coalesced group before ev and starts ev's: the
// events of one socket read share its arrival time.
func (x *exchange) openBatch(chunks []event.Chunk, ev *streamEvent) {
	x.closeBatch(chunks)
	x.batchRead, x.batchCount, x.batchFrom = ev.Read, 0, len(chunks)
	x.batchAt = ev.At.Sub(x.start)
}

// firstEvent records the stream's first event, which arrived at at and
// parsed with perr: a first event that carries nothing but the role is
// flagged.
func (x *exchange) firstEvent(at time.Duration, perr error) {
	ci := &x.ci
	x.sawEvent = true
	x.rec.FirstEvent = x.lag + at
	if ci.tokens == 0 && !ci.end && perr == nil && ci.serverErr == "" {
		x.rec.Flags = append(x.rec.Flags, event.FlagRoleOnlyFirst)
	}
}

// takeUsage keeps the plausible counts of a usage chunk; limit bounds the
// output and reasoning tokens.
func (x *exchange) takeUsage(ci *chunkInfo, limit int) {
	x.usage = true
	if plausibleTokens(ci.outputTokens, limit) {
		x.usageOut = ci.outputTokens
	}
	if plausibleTokens(ci.promptTokens, maxTokenLength) {
		x.rec.PromptTokens = ci.promptTokens
	}
	if plausibleTokens(ci.cachedTokens, maxTokenLength) {
		x.usageCache = ci.cachedTokens
	}
	if plausibleTokens(ci.reasonTokens, limit) {
		x.usageReas = ci.reasonTokens
	}
}

// parse reads one event into ci. The OpenAI and Anthropic dialects are
// called directly, with the stream's chunk shape; the others through the
// interface.
func (x *exchange) parse(data []byte, ci *chunkInfo) error {
	switch d := x.c.d.(type) {
	case openAIDialect:
		return d.parseStream(data, ci, &x.shape)
	case anthropicDialect:
		return d.parseStream(data, ci, &x.shape)
	}
	return x.c.d.parse(data, ci)
}

// closeBatch writes the size of the finished coalesced group into its chunks.
func (x *exchange) closeBatch(chunks []event.Chunk) {
	for i := x.batchFrom; i < len(chunks); i++ {
		chunks[i].Batch = x.batchCount
	}
}

// serverEventError is an error event inside a stream.
type serverEventError struct{ msg string }

func (e *serverEventError) Error() string { return "server error event: " + e.msg }

// addTiming merges a server timing into the record, without the figures
// that cannot be true.
func (x *exchange) addTiming(st *event.ServerTiming) {
	sanitizeTiming(st, tokenLimit(x.spec.OutputTokens))
	if x.rec.Server == nil {
		x.rec.Server = st
		return
	}
	cur := x.rec.Server
	if !strings.Contains(cur.Source, st.Source) {
		cur.Source += "+" + st.Source
	}
	for k, v := range st.Stages {
		cur.Stages[k] = v
	}
	if st.PromptTokens > 0 {
		cur.PromptTokens = st.PromptTokens
	}
	if st.OutputTokens > 0 {
		cur.OutputTokens = st.OutputTokens
	}
	if st.CachedTokens > 0 {
		cur.CachedTokens = st.CachedTokens
	}
}

// sourceUsage names a server timing that holds only what the usage said
// about the prompt cache (no stage).
const sourceUsage = "usage"

// noteCachedPrompt records the cached prompt tokens the usage reported
// (when no timing said so already) and flags a request whose prompt came
// largely from the server's prompt cache.
func (x *exchange) noteCachedPrompt() {
	rec := x.rec
	if x.usageCache > 0 {
		if rec.Server == nil {
			rec.Server = &event.ServerTiming{Source: sourceUsage}
		}
		if rec.Server.CachedTokens == 0 {
			rec.Server.CachedTokens = x.usageCache
		}
	}
	if rec.Server != nil && promptCached(rec.Server.CachedTokens, cmp.Or(rec.Server.PromptTokens, rec.PromptTokens)) {
		rec.Flags = append(rec.Flags, event.FlagPromptCached)
	}
}

// promptCached is the rule for event.FlagPromptCached: at least half of
// the prompt's tokens came from the server's prompt cache. From there on the
// prefill the server reports, and the TTFT, are mostly a cache lookup, not
// a cold prefill; a few cached tokens (llama.cpp reuses the BOS token of
// every prompt) are not.
func promptCached(cached, promptTokens int) bool {
	return cached > 0 && 2*cached >= promptTokens
}

// finish fills the derived fields once the outcome is known.
func (x *exchange) finish() {
	rec := x.rec
	if rec.Outcome == "" {
		rec.Outcome = event.OutcomeStreamReset // unreachable: every path sets one
	}
	rec.Stages = x.stages()
	if !x.failed {
		rec.E2E = x.lag + x.endAt
	} else {
		rec.E2E = x.lag + time.Since(x.start)
	}
	if len(rec.Chunks) > 0 {
		rec.TTFT = x.lag + x.firstAt
	}
	rec.OutputTokens = x.tokens
	if x.usage && x.usageOut > 0 {
		rec.OutputTokens = x.usageOut
	}
	x.noteReasoning()
	if rec.OK() && x.c.d.asksUsage() && !x.usage {
		rec.Flags = append(rec.Flags, event.FlagMissingUsage)
	}
	if rec.OK() && len(rec.Chunks) == 0 {
		rec.Flags = append(rec.Flags, event.FlagNoContent)
	}
	if rec.ReplacementChars > 0 {
		rec.Flags = append(rec.Flags, event.FlagUTF8Defect)
	}
	if rec.OK() {
		x.noteCachedPrompt()
	}
	if nagle.Suspect(rec.Chunks) {
		rec.Flags = append(rec.Flags, event.FlagNagleSuspect)
	}
	if sc, ok := x.phases.conn.(*h2StreamConn); ok {
		rec.HTTP2 = sc.record(x.start, x.firstAt, len(rec.Chunks) > 0)
	}
	if !x.phases.gotConn.IsZero() {
		rec.ReusedConn = x.phases.reused
		rec.ConnectRTT = x.phases.connect
		if x.rtt > 0 {
			rec.ConnectRTT = x.rtt
		}
	}
}

// noteReasoning records how much of the output was reasoning and when the
// answer began. The usage's count wins where it has one, as for the output
// tokens. A server that reasons without streaming the reasoning (OpenAI
// without a summary) gives only the count: the thinking then lies inside
// the TTFT, and the answer began at the first token.
func (x *exchange) noteReasoning() {
	rec := x.rec
	if x.reasoned == 0 && (!x.usage || x.usageReas == 0 || !x.answered) {
		return
	}
	rec.ReasoningTokens = x.reasoned
	if x.usage && x.usageReas > 0 {
		rec.ReasoningTokens = x.usageReas
	}
	rec.ReasoningTokens = min(rec.ReasoningTokens, rec.OutputTokens)
	if x.answered {
		// The first token's boundary may have been pushed later by the
		// stages' clipping; the answer cannot come before it.
		rec.TTFTAnswer = x.lag + max(x.answerAt, x.firstAt)
	}
}

// stages returns the contiguous client stages reached, each running from
// the end of the previous one. They are built from boundaries measured
// from start on the monotonic clock, forced to be non-decreasing, so they
// add up exactly to TTFT (lag + first content offset).
func (x *exchange) stages() []event.StageTiming {
	out := make([]event.StageTiming, 0, 9)
	add := func(s event.Stage, d time.Duration) {
		out = append(out, event.StageTiming{Stage: s, Duration: d, Provenance: event.Measured})
	}
	if x.lag > 0 {
		add(event.StageSchedLag, x.lag)
	}
	if x.bodyReady.IsZero() {
		return out
	}
	prev := time.Duration(0)
	next := func(t time.Time) time.Duration {
		d := max(t.Sub(x.start), prev)
		step := d - prev
		prev = d
		return step
	}
	add(event.StageSerialize, next(x.bodyReady))
	p := x.phases
	if p.gotConn.IsZero() {
		return out
	}
	// dns, connect and tls lie inside [bodyReady, gotConn]; conn_wait is the
	// rest. Each is clipped so they cannot overrun the whole.
	total := next(p.gotConn)
	dns := min(p.dns, total)
	conn := min(p.connect, total-dns)
	tlsD := min(p.tls, total-dns-conn)
	add(event.StageDNS, dns)
	add(event.StageConnect, conn)
	add(event.StageTLS, tlsD)
	add(event.StageConnWait, total-dns-conn-tlsD)
	if p.wrote.IsZero() {
		return out
	}
	add(event.StageWrite, next(p.wrote))
	if x.rec.Status == 0 {
		return out
	}
	add(event.StageWaitHeaders, next(x.headers))
	if len(x.rec.Chunks) == 0 {
		return out
	}
	add(event.StageFirstToken, next(x.start.Add(x.firstAt)))
	// Clipping can only push boundaries later; the first token is the last
	// boundary, so keep TTFT equal to the sum.
	x.firstAt = prev
	return out
}

func (c *Client) setHeaders(h http.Header, spec RequestSpec) {
	for k, vs := range c.header {
		h[k] = vs[:len(vs):len(vs)] // shared and read-only: an append elsewhere must copy
	}
	h.Set("Content-Type", "application/json")
	if c.d.ndjson() {
		h.Set("Accept", "application/x-ndjson")
	} else {
		h.Set("Accept", "text/event-stream")
	}
	if spec.ID != "" {
		h.Set("X-Request-Id", spec.ID)
	}
	if spec.TraceID != "" && spec.SpanID != "" {
		h.Set("Traceparent", "00-"+spec.TraceID+"-"+spec.SpanID+"-01")
	}
}

// statusError describes a non-2xx response with a snippet of its body,
// preferring the error message of the usual JSON error shapes.
func statusError(resp *http.Response) string {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := bodyErrorMessage(raw)
	if msg == "" {
		msg = strings.TrimSpace(excerpt(bytes.TrimSpace(raw), 200))
	}
	if msg == "" {
		return fmt.Sprintf("http %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return fmt.Sprintf("http %d: %s", resp.StatusCode, excerpt([]byte(msg), 200))
}

// bodyErrorMessage extracts "error" (a string or an object with "message")
// or a top-level "message" from a JSON error body.
func bodyErrorMessage(raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return ""
	}
	if msg := errorMessage(body.Error); msg != "" {
		return msg
	}
	return body.Message
}

// notAStream says why a 2xx response cannot be the stream asked for, or ""
// when it may be one: a compressed body (latscope asks for none, since
// compression buffers the stream and hides token timing), an HTML page, or
// a JSON document where an event stream was asked for.
func notAStream(resp *http.Response, ndjson bool) string {
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return fmt.Sprintf("server compressed the stream (Content-Encoding: %s) though latscope asked for none; compression hides token timing",
			excerpt([]byte(enc), 40))
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return "server answered an HTML page, not a stream (a proxy, login or error page?): " + bodySnippet(resp.Body)
	case mt == "application/json" && !ndjson:
		return "server answered application/json, not an event stream: " + bodySnippet(resp.Body)
	}
	return ""
}

// bodySnippet returns the start of a body on one line, for a message.
func bodySnippet(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 512))
	return excerpt([]byte(strings.Join(strings.Fields(string(b)), " ")), 200)
}
