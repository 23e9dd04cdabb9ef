package attribute

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/eventclock"
)

// Attributor defaults.
const (
	DefaultJoinWait   = 2 * time.Second
	DefaultMaxPending = 16384
	// DefaultMaxPendingChunks bounds the content chunks of the held
	// requests (16 bytes each: 32 MB): MaxPending alone is a count, and a
	// request's chunks follow its output length, so 16,384 held requests
	// of 8,192 tokens would be 2 GB.
	DefaultMaxPendingChunks = 1 << 21
	DefaultSpanTTL          = time.Minute
	DefaultMaxSpans         = 65536
	maxTargets              = 1024 // bound on the per-target RTT memory
	expiryReportEvery       = 10 * time.Second
	// connectWindow is how many recent connect times per target the
	// network estimate is the lowest of.
	connectWindow = 16
	// intervalMemoryAge is how long (in sample time) a stage's statistics
	// stand in for later intervals that observed nothing of that stage.
	intervalMemoryAge = 30 * time.Second
)

// AttributorConfig configures an Attributor.
type AttributorConfig struct {
	// JoinSpans says a span source runs (an OTLP receiver): a finished
	// request whose span has not arrived yet is held for up to JoinWait.
	JoinSpans bool
	// JoinWait is how long a finished request is held for its span; zero
	// means DefaultJoinWait, negative means never hold. Servers export spans
	// in batches (vLLM's OpenTelemetry SDK waits up to
	// OTEL_BSP_SCHEDULE_DELAY, 5 s by default), so lower that on the server
	// or raise this.
	JoinWait time.Duration
	// Now is the clock for JoinWait deadlines and span expiry; time.Now when nil.
	Now func() time.Time
	// MaxPending bounds the held requests; past it the oldest is released
	// without its span. DefaultMaxPending when zero.
	MaxPending int
	// MaxPendingChunks bounds the held requests' content chunks, the bulk
	// of their size; past it the oldest are released without their span.
	// DefaultMaxPendingChunks when zero.
	MaxPendingChunks int
	// SpanTTL and MaxSpans bound the spans kept for requests that have not
	// finished yet (or never will, e.g. another client's).
	SpanTTL  time.Duration
	MaxSpans int
	// Poll is how often held requests are checked against their deadline;
	// derived from JoinWait when zero.
	Poll time.Duration
	// UserSpans makes each span that joins none of latscope's requests a
	// record of its own: one of the server's users' requests (a watch). A
	// span waits UserSpanWait for a request of latscope's to claim it (a
	// canary's, whose client may finish after the server exported its
	// span); unclaimed, it leaves as a request flagged
	// event.FlagServerReported (see userRecord). UserSpanWait 0: at once,
	// for a session that sends no load of its own.
	UserSpans    bool
	UserSpanWait time.Duration
	// Server is the kind of server measured, as in event.Session.Server
	// ("llamacpp", "vllm", "latscope-sim"); a session header passing through
	// overrides it. It decides whether the wait for the response headers is
	// the slot wait (HeadersAtSlot).
	Server string
}

// AttributorStats counts the attributor's work.
type AttributorStats struct {
	Attributed   uint64 // OK requests given a breakdown
	FromRecord   uint64 // server timing from the request's own record
	FromSpan     uint64 // server timing joined from a span
	FromInterval uint64 // only interval means available (estimated)
	NoServer     uint64 // no server data at all
	Expired      uint64 // held for JoinWait and released without a span
	Dropped      uint64 // not delivered because the consumer stopped reading after ctx ended
	Spans        uint64 // span records received
	Users        uint64 // spans made users' records (UserSpans)
}

// Attributor is the pipeline stage between the sources and the consumers: it
// fills Request.Breakdown, joining each request with the best server data
// there is for it, and keeps the server's spans (event.Span) until their
// request finishes; spans are not passed on. One goroutine (Run) owns all of
// its state.
type Attributor struct {
	cfg      AttributorConfig
	settle   chan chan struct{}
	finished chan struct{}

	attributed, fromRecord, fromSpan, fromInterval, noServer, expired, dropped, spans, users atomic.Uint64
}

// NewAttributor returns an Attributor with cfg's defaults filled in.
func NewAttributor(cfg AttributorConfig) *Attributor {
	switch {
	case !cfg.JoinSpans || cfg.JoinWait < 0:
		cfg.JoinWait = 0
	case cfg.JoinWait == 0:
		cfg.JoinWait = DefaultJoinWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxPendingChunks <= 0 {
		cfg.MaxPendingChunks = DefaultMaxPendingChunks
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.SpanTTL <= 0 {
		cfg.SpanTTL = DefaultSpanTTL
	}
	if cfg.MaxSpans <= 0 {
		cfg.MaxSpans = DefaultMaxSpans
	}
	cfg.UserSpanWait = max(cfg.UserSpanWait, 0)
	if cfg.Poll <= 0 {
		cfg.Poll = min(max(cfg.JoinWait/20, 2*time.Millisecond), 20*time.Millisecond)
	}
	return &Attributor{cfg: cfg, settle: make(chan chan struct{}), finished: make(chan struct{})}
}

// Stats returns the attributor's counters; safe to call while Run runs.
func (a *Attributor) Stats() AttributorStats {
	return AttributorStats{
		Attributed:   a.attributed.Load(),
		FromRecord:   a.fromRecord.Load(),
		FromSpan:     a.fromSpan.Load(),
		FromInterval: a.fromInterval.Load(),
		NoServer:     a.noServer.Load(),
		Expired:      a.expired.Load(),
		Dropped:      a.dropped.Load(),
		Spans:        a.spans.Load(),
		Users:        a.users.Load(),
	}
}

// heldRequest is a finished request waiting for its span.
type heldRequest struct {
	ev       event.Event
	deadline time.Time
	network  NetworkEstimate
	keys     []string
	done     bool // released; its slot in pending is skipped
}

// attributorState is owned by the Run goroutine.
type attributorState struct {
	server    string         // the server kind (AttributorConfig.Server, or the session header's)
	intervals intervalMemory // the server's interval statistics
	queue     queueReadings  // the server's recent queue-depth readings
	frontEnd  frontEndWaits  // the server waits of recent requests that found no queue: the front end's
	connects  map[string]*connectTimes
	loading   bool             // the server said it is loading its model, and has not served a request since
	clock     eventclock.Clock // stamps the attributor's own markers
	spans     *spanStore
	pending   []*heldRequest          // arrival order, which is also deadline order
	held      map[string]*heldRequest // by request and trace key
	heldN     int                     // requests held now
	heldChunk int                     // their content chunks
	settlers  []chan struct{}         // Settle calls waiting for heldN to reach 0
	users     []*userSpan             // spans waiting to become users' records, deadline order
	unjoined  *spanStore              // keys of latscope's requests released without their span (UserSpans)

	lastExpiryReport time.Time
	expiredSince     uint64
}

// shutdownGrace bounds how long Run keeps offering events to a consumer that
// has stopped reading once ctx has ended.
const shutdownGrace = time.Second

// Run reads events from in and writes them to out until in is closed, or
// until ctx ends. Spans are kept and joined onto their requests; other
// events and requests that need no wait pass straight through; a request
// waiting for its span goes out as soon as the span arrives or JoinWait has
// passed, so requests may leave in a different order than they came (each
// carries its own timestamps). When in closes no span can arrive any more, so
// held requests are released at once; likewise when ctx ends. Run closes out
// before it returns.
func (a *Attributor) Run(ctx context.Context, in <-chan event.Event, out chan<- event.Event) {
	defer close(a.finished)
	defer close(out)
	st := &attributorState{
		server:   a.cfg.Server,
		connects: map[string]*connectTimes{},
		clock:    eventclock.New(a.cfg.Now),
		spans:    newSpanStore(a.cfg.SpanTTL, a.cfg.MaxSpans),
		unjoined: newSpanStore(a.cfg.SpanTTL, a.cfg.MaxSpans),
		held:     map[string]*heldRequest{},
	}
	ticker := time.NewTicker(a.cfg.Poll)
	defer ticker.Stop()

	var outbox []event.Event
	for {
		var tick <-chan time.Time
		if st.heldN > 0 || len(st.users) > 0 {
			tick = ticker.C
		}
		select {
		case <-ctx.Done():
			a.shutdown(st, out, outbox)
			return
		case ev, ok := <-in:
			if !ok {
				outbox = a.releaseAll(st, outbox)
				a.deliver(ctx, st, out, outbox)
				a.wakeSettlers(st)
				return
			}
			outbox = a.accept(st, ev, outbox)
		case done := <-a.settle:
			// The pipeline has handed over everything the primaries
			// emitted before it settles; a caller that feeds in through
			// a buffer may not have: take what is buffered before
			// deciding whether anything is still held.
			for n := len(in); n > 0; n-- {
				ev, ok := <-in
				if !ok {
					break
				}
				outbox = a.accept(st, ev, outbox)
			}
			st.settlers = append(st.settlers, done)
		case <-tick:
			outbox = a.expire(st, outbox, false)
		}
		if !a.deliver(ctx, st, out, outbox) {
			return
		}
		outbox = outbox[:0]
		if st.heldN == 0 {
			a.wakeSettlers(st)
		}
	}
}

// deliver writes outbox to out; false when ctx ended meanwhile (the rest
// was handed to shutdown).
func (a *Attributor) deliver(ctx context.Context, st *attributorState, out chan<- event.Event, outbox []event.Event) bool {
	for i, ev := range outbox {
		select {
		case out <- ev:
		case <-ctx.Done():
			a.shutdown(st, out, outbox[i:])
			return false
		}
	}
	return true
}

func (a *Attributor) wakeSettlers(st *attributorState) {
	for _, c := range st.settlers {
		close(c)
	}
	st.settlers = nil
}

// Settle returns once no finished request is waiting for its span (each
// waits at most JoinWait), or when ctx ends or Run has returned. The
// pipeline calls it after the probe ends and before it stops the span
// receiver, so late spans still reach the last requests.
func (a *Attributor) Settle(ctx context.Context) {
	done := make(chan struct{})
	select {
	case a.settle <- done:
	case <-ctx.Done():
		return
	case <-a.finished:
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-a.finished:
	}
}

// accept handles one incoming event, appending what is ready to go out.
func (a *Attributor) accept(st *attributorState, ev event.Event, ready []event.Event) []event.Event {
	switch {
	case ev.Span != nil:
		return a.acceptSpan(st, ev.Span, ready)
	case ev.Server != nil:
		st.intervals.add(ev.Server)
		st.queue.add(ev.Server)
	case ev.Session != nil && ev.Session.Server != "":
		st.server = ev.Session.Server
	}
	r := ev.Request
	if r == nil {
		return append(ready, ev)
	}
	network := st.networkFor(r)
	ready = a.noteLoading(st, r, ready)
	if !r.OK() || len(r.Breakdown) > 0 {
		return append(ready, ev) // failed, or attributed already (a replay)
	}
	if len(serverStages(r.Server, "")) > 0 {
		a.fromRecord.Add(1)
		return append(ready, a.finish(st, ev, network))
	}
	keys := requestKeys(r)
	if a.cfg.JoinSpans {
		if timing, ok := st.spans.find(keys, a.cfg.Now()); ok {
			r.Server = joinTiming(r.Server, timing)
			a.fromSpan.Add(1)
			return append(ready, a.finish(st, ev, network))
		}
	}
	if a.cfg.JoinWait <= 0 || len(keys) == 0 {
		return append(ready, a.finish(st, ev, network))
	}
	h := &heldRequest{ev: ev, deadline: a.cfg.Now().Add(a.cfg.JoinWait), network: network, keys: keys}
	st.pending = append(st.pending, h)
	st.heldN++
	st.heldChunk += len(r.Chunks)
	for _, k := range keys {
		st.held[k] = h
	}
	// Over a bound, the oldest go first (the newest stays, however large).
	// Chosen before any is released: release compacts pending.
	var over []*heldRequest
	n, chunks := st.heldN, st.heldChunk
	for _, old := range st.pending {
		if n <= a.cfg.MaxPending && chunks <= a.cfg.MaxPendingChunks || n == 1 {
			break
		}
		if !old.done {
			over = append(over, old)
			n, chunks = n-1, chunks-len(old.ev.Request.Chunks)
		}
	}
	for _, old := range over {
		a.expired.Add(1)
		a.noteUnjoined(st, old)
		ready = append(ready, a.release(st, old))
	}
	return ready
}

// acceptSpan keeps a span and releases the request waiting for it, if any.
func (a *Attributor) acceptSpan(st *attributorState, sp *event.Span, ready []event.Event) []event.Event {
	a.spans.Add(1)
	keys := spanKeys(sp)
	for _, k := range keys {
		h := st.held[k]
		if h == nil || h.done {
			continue
		}
		h.ev.Request.Server = joinTiming(h.ev.Request.Server, cloneTiming(&sp.Timing))
		a.fromSpan.Add(1)
		return append(ready, a.release(st, h))
	}
	if a.cfg.UserSpans {
		if _, late := st.unjoined.find(keys, a.cfg.Now()); late {
			return ready // a request of latscope's, released before its span came: never a user's
		}
		if a.cfg.UserSpanWait <= 0 {
			return a.emitUser(ready, sp)
		}
	}
	stored := st.spans.put(keys, &sp.Timing, a.cfg.Now())
	if a.cfg.UserSpans {
		ready = a.holdUser(st, ready, sp, stored)
	}
	return ready
}

// release finishes a held request and forgets it.
func (a *Attributor) release(st *attributorState, h *heldRequest) event.Event {
	h.done = true
	st.heldN--
	st.heldChunk -= len(h.ev.Request.Chunks)
	for _, k := range h.keys {
		if st.held[k] == h {
			delete(st.held, k)
		}
	}
	// Released requests leave a done slot in pending; drop those once they
	// are the larger part, so pending stays proportional to what is held.
	if len(st.pending) > 64 && len(st.pending) > 2*st.heldN {
		kept := st.pending[:0]
		for _, p := range st.pending {
			if !p.done {
				kept = append(kept, p)
			}
		}
		clear(st.pending[len(kept):])
		st.pending = kept
	}
	return a.finish(st, h.ev, h.network)
}

// expire releases the held requests past their deadline (all of them when
// force is set) and compacts the pending list.
func (a *Attributor) expire(st *attributorState, ready []event.Event, force bool) []event.Event {
	now := a.cfg.Now()
	ready = a.releaseUsers(st, ready, now, force)
	kept := st.pending[:0]
	for _, h := range st.pending {
		switch {
		case h.done:
		case force || !now.Before(h.deadline):
			a.expired.Add(1)
			st.expiredSince++
			a.noteUnjoined(st, h)
			ready = append(ready, a.release(st, h))
		default:
			kept = append(kept, h)
		}
	}
	clear(st.pending[len(kept):])
	st.pending = kept
	if st.expiredSince > 0 && !force && now.Sub(st.lastExpiryReport) >= expiryReportEvery {
		ready = append(ready, event.NewMarker(&event.Marker{
			Time: st.clock.Stamp(now), Kind: event.MarkerCollector, Source: attributorSource,
			Message: fmt.Sprintf("%d request(s) got no server span within %s: is the server exporting spans, and sooner than the join wait (OTEL_BSP_SCHEDULE_DELAY)?",
				st.expiredSince, a.cfg.JoinWait),
			Values: map[string]float64{"expired": float64(st.expiredSince)},
		}))
		st.lastExpiryReport, st.expiredSince = now, 0
	}
	return ready
}

func (a *Attributor) releaseAll(st *attributorState, ready []event.Event) []event.Event {
	return a.expire(st, ready, true)
}

// finish fills the breakdown of an OK request.
func (a *Attributor) finish(st *attributorState, ev event.Event, network NetworkEstimate) event.Event {
	r := ev.Request
	interval := st.intervals.sample()
	switch {
	case len(serverStages(r.Server, "")) > 0:
	case hasIntervalEstimates(interval):
		a.fromInterval.Add(1)
	default:
		a.noServer.Add(1)
	}
	gauge := st.queue.during(atServer(r))
	var wait *placedWait
	r.Breakdown, wait = attribute(r, AttributionInput{Server: r.Server, Interval: interval, RecentQueueLimit: st.intervals.queueLimit(),
		Network: network, ServerKind: st.server, Queue: gauge, FrontEnd: st.frontEnd.floor()})
	if wait != nil && gauge == QueueEmpty {
		st.frontEnd.add(wait.wait)
	}
	a.attributed.Add(1)
	return ev
}

// attributorSource names the attributor in its markers.
const attributorSource = "attributor"

// noteLoading emits a marker when the server first answers that it is
// still loading its model (llama-server: 503 "Loading model"), and forgets
// it once a request succeeds, so the next load is reported again.
func (a *Attributor) noteLoading(st *attributorState, r *event.Request, ready []event.Event) []event.Event {
	switch {
	case r.OK():
		st.loading = false
	case !st.loading && modelLoading(r):
		st.loading = true
		ready = append(ready, event.NewMarker(&event.Marker{
			Time: st.clock.Now(), Kind: event.MarkerCollector, Source: attributorSource,
			Message:    "model loading: the server answered " + r.Error + "; requests fail until it is ready",
			RequestIDs: []string{r.ID},
		}))
	}
	return ready
}

// modelLoading reports whether a failed request says the server is still
// loading its model.
func modelLoading(r *event.Request) bool {
	return r.Outcome == event.OutcomeHTTPStatus && r.Status == http.StatusServiceUnavailable &&
		strings.Contains(strings.ToLower(r.Error), "loading")
}

// joinTiming is a span's timing with what the request's own record knew
// and the span does not say (the prompt's cached tokens).
func joinTiming(own, span *event.ServerTiming) *event.ServerTiming {
	if own == nil {
		return span
	}
	if span.CachedTokens == 0 {
		span.CachedTokens = own.CachedTokens
	}
	if span.PromptTokens == 0 {
		span.PromptTokens = own.PromptTokens
	}
	return span
}

// shutdown releases every held request and offers the outbox to out for at
// most shutdownGrace, counting what the consumer did not take.
func (a *Attributor) shutdown(st *attributorState, out chan<- event.Event, outbox []event.Event) {
	outbox = a.releaseAll(st, outbox)
	a.wakeSettlers(st)
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	for i, ev := range outbox {
		select {
		case out <- ev:
		case <-grace.C:
			a.dropped.Add(uint64(len(outbox) - i))
			return
		}
	}
}

// networkFor records r's connect RTT, if it dialled, among its target's
// recent ones and returns the network estimate for r.
func (st *attributorState) networkFor(r *event.Request) NetworkEstimate {
	c := st.connects[r.Target]
	if r.ConnectRTT > 0 {
		if c == nil {
			if len(st.connects) >= maxTargets {
				clear(st.connects) // many targets: forget, rather than grow without bound
			}
			c = &connectTimes{}
			st.connects[r.Target] = c
		}
		c.add(r.ConnectRTT)
	}
	if c == nil {
		return NetworkEstimate{}
	}
	return c.estimate()
}

// connectTimes keeps a target's most recent connect times. The network
// estimate is the lowest of them: a slow dial (a busy moment, a lost SYN)
// only ever adds to the path's round trip, so the fastest recent one is the
// closest to it, and keeping only recent ones follows a route change.
type connectTimes struct {
	recent [connectWindow]time.Duration
	n      int // how many of recent hold a sample
	next   int // where the next sample goes
}

func (c *connectTimes) add(d time.Duration) {
	c.recent[c.next] = d
	c.next = (c.next + 1) % len(c.recent)
	c.n = min(c.n+1, len(c.recent))
}

func (c *connectTimes) estimate() NetworkEstimate {
	if c.n == 0 {
		return NetworkEstimate{}
	}
	return NetworkEstimate{RTT: slices.Min(c.recent[:c.n]), Samples: c.n}
}

// intervalMemory keeps the server's interval statistics for the
// attributor: the latest sample's, with each stage that observed nothing in
// it taken from the latest interval that did (up to intervalMemoryAge
// before), so that a quiet interval does not leave the requests finishing
// in it without an estimate. Stale samples (repeats after a failed scrape)
// add nothing.
type intervalMemory struct {
	dialect string
	seen    map[string]seenStat
	merged  *event.ServerSample
	limits  []seenLimit // each recent interval's plausible queue limit, oldest first
}

type seenLimit struct {
	limit time.Duration
	at    time.Time
}

type seenStat struct {
	stat event.HistStat
	at   time.Time
}

func (m *intervalMemory) add(s *event.ServerSample) {
	if s.Stale || len(s.Stages) == 0 {
		return
	}
	if m.seen == nil || s.Dialect != m.dialect {
		m.dialect, m.seen, m.limits = s.Dialect, map[string]seenStat{}, nil
	}
	if h, ok := s.Stages[string(event.StageQueue)]; ok && h.Count > 0 {
		limit, _ := plausibleQueue(s)
		m.limits = append(m.limits, seenLimit{limit: limit, at: s.Time})
	}
	for len(m.limits) > 0 && s.Time.Sub(m.limits[0].at) > intervalMemoryAge {
		m.limits = m.limits[1:]
	}
	for name, h := range s.Stages {
		if h.Count > 0 {
			m.seen[name] = seenStat{stat: h, at: s.Time}
		}
	}
	merged := &event.ServerSample{Time: s.Time, Source: s.Source, Dialect: s.Dialect, Interval: s.Interval,
		Stages: make(map[string]event.HistStat, len(s.Stages))}
	for name, h := range s.Stages {
		merged.Stages[name] = h
	}
	for name, seen := range m.seen {
		if s.Time.Sub(seen.at) > intervalMemoryAge {
			delete(m.seen, name)
			continue
		}
		merged.Stages[name] = seen.stat
	}
	m.merged = merged
}

// sample returns the statistics to attribute with; nil before any.
func (m *intervalMemory) sample() *event.ServerSample { return m.merged }

// queueLimit is the longest queue wait the recent intervals make plausible.
func (m *intervalMemory) queueLimit() time.Duration {
	var limit time.Duration
	for _, l := range m.limits {
		limit = max(limit, l.limit)
	}
	return limit
}

// queueReadings keeps the server's queue-depth readings (ServerSample.Waiting)
// of the last intervalMemoryAge, oldest first, to tell whether requests
// were waiting while one request was at the server. Stale samples (repeats
// after a failed scrape) are not readings.
type queueReadings struct {
	readings []queueReading
}

type queueReading struct {
	at      time.Time
	waiting float64
}

func (q *queueReadings) add(s *event.ServerSample) {
	if s.Stale || s.Waiting == nil {
		return
	}
	q.readings = append(q.readings, queueReading{at: s.Time, waiting: *s.Waiting})
	drop := 0
	for drop < len(q.readings) && s.Time.Sub(q.readings[drop].at) > intervalMemoryAge {
		drop++
	}
	q.readings = slices.Delete(q.readings, 0, drop)
}

// during says what the readings showed between from and to, the time a
// request was at the server: the readings taken then, and the last one
// before (the queue the request arrived into; all there is when the
// request was shorter than a scrape interval). Waiting when any of them
// counted a request waiting.
func (q *queueReadings) during(from, to time.Time) QueueGauge {
	gauge := QueueUnknown
	for i, rd := range q.readings {
		next := i+1 < len(q.readings) && !q.readings[i+1].at.After(from)
		if next || rd.at.After(to) {
			continue // an earlier reading than the last before from, or one after the request
		}
		if rd.waiting > 0 {
			return QueueWaiting
		}
		gauge = QueueEmpty
	}
	return gauge
}

// atServer is when r was at the server, as far as the client can tell:
// from its start to its first token.
func atServer(r *event.Request) (from, to time.Time) {
	sent := r.Intended
	if sent.IsZero() {
		sent = r.Start
	}
	return r.Start, sent.Add(r.TTFT)
}

func requestKey(id string) string { return "r:" + id }
func traceKey(id string) string   { return "t:" + strings.ToLower(id) }

// requestKeys are the keys a request's span may be stored under.
func requestKeys(r *event.Request) []string {
	var keys []string
	if r.ID != "" {
		keys = append(keys, requestKey(r.ID))
	}
	if r.TraceID != "" {
		keys = append(keys, traceKey(r.TraceID))
	}
	return keys
}

// spanKeys are the keys a span is stored under: its request id (and, since
// vLLM names the engine request "chatcmpl-<X-Request-Id>" or
// "cmpl-<X-Request-Id>", the header value the probe knows) and its trace id.
func spanKeys(sp *event.Span) []string {
	var keys []string
	if id := sp.RequestID; id != "" {
		keys = append(keys, requestKey(id))
		for _, prefix := range []string{"chatcmpl-", "cmpl-"} {
			if base, found := strings.CutPrefix(id, prefix); found && base != "" {
				keys = append(keys, requestKey(base))
			}
		}
	}
	if sp.TraceID != "" {
		keys = append(keys, traceKey(sp.TraceID))
	}
	return keys
}

// spanStore is a bounded map of span timings with a TTL, owned by the
// attributor's goroutine. Entries expire in insertion order (one TTL for
// all), so a FIFO queue finds the oldest.
type spanStore struct {
	ttl   time.Duration
	max   int
	byKey map[string]*storedTiming
	fifo  []*storedTiming // oldest first; fifo[head:] are live
	head  int
}

type storedTiming struct {
	timing  *event.ServerTiming
	at      time.Time
	keys    []string
	claimed bool // a request of latscope's found it (it is not a user's)
}

func newSpanStore(ttl time.Duration, max int) *spanStore {
	return &spanStore{ttl: ttl, max: max, byKey: map[string]*storedTiming{}}
}

// put stores a span's timing under keys and returns its entry (nil for no keys).
func (s *spanStore) put(keys []string, st *event.ServerTiming, now time.Time) *storedTiming {
	if len(keys) == 0 {
		return nil
	}
	s.expire(now)
	for s.len() >= s.max {
		s.dropOldest()
	}
	e := &storedTiming{timing: st, at: now, keys: keys}
	for _, k := range keys {
		s.byKey[k] = e
	}
	s.fifo = append(s.fifo, e)
	return e
}

// find returns a copy of the timing stored under the first of keys that has one.
func (s *spanStore) find(keys []string, now time.Time) (*event.ServerTiming, bool) {
	s.expire(now)
	for _, k := range keys {
		if e, ok := s.byKey[k]; ok {
			e.claimed = true
			return cloneTiming(e.timing), true
		}
	}
	return nil, false
}

func (s *spanStore) len() int { return len(s.fifo) - s.head }

func (s *spanStore) expire(now time.Time) {
	for s.len() > 0 && now.Sub(s.fifo[s.head].at) >= s.ttl {
		s.dropOldest()
	}
}

func (s *spanStore) dropOldest() {
	e := s.fifo[s.head]
	s.fifo[s.head] = nil
	s.head++
	for _, k := range e.keys {
		// A later span may have taken the key over; leave that one.
		if s.byKey[k] == e {
			delete(s.byKey, k)
		}
	}
	// Compact once the dead prefix is the larger half, so the slice stays
	// proportional to the live entries.
	if s.head > 64 && s.head*2 > len(s.fifo) {
		n := copy(s.fifo, s.fifo[s.head:])
		clear(s.fifo[n:])
		s.fifo = s.fifo[:n]
		s.head = 0
	}
}

func cloneTiming(st *event.ServerTiming) *event.ServerTiming {
	c := *st
	c.Stages = make(map[event.Stage]time.Duration, len(st.Stages))
	for k, v := range st.Stages {
		c.Stages[k] = v
	}
	return &c
}
