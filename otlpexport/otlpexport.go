// Package otlpexport sends latscope's view of each request to an
// OpenTelemetry collector (OTLP/HTTP) as a trace: a client span for the
// whole request with one child span per stage, client and server stages,
// with their provenance, token counts and ids as attributes. The trace and
// span ids are the ones the probe sent in traceparent, so in Jaeger or Tempo
// latscope's spans and the server's own spans form one trace.
//
// The exporter is a consumer of the pipeline's fan-out. It batches spans
// (at most one export a second, or every MaxBatch requests) and never holds
// up measuring: give it a lossy subscription, and a slow or absent
// collector costs dropped exports, which are counted, not latency.
package otlpexport

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/latscope/latscope/event"
)

// Defaults.
const (
	DefaultMaxBatch      = 256 // requests per export
	DefaultFlush         = time.Second
	DefaultExportTimeout = 10 * time.Second
	DefaultFlushTimeout  = 5 * time.Second
	DefaultMaxQueue      = 4 // batches waiting for the collector
)

// Config configures an Exporter.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP traces URL, e.g.
	// http://127.0.0.1:4318/v1/traces (a URL without a path gets /v1/traces).
	Endpoint string
	// Headers are sent with every export (e.g. an authorization the
	// collector needs); they never appear in a span.
	Headers map[string]string
	// MaxBatch and Flush bound a batch by size and age.
	MaxBatch int
	Flush    time.Duration
	// ExportTimeout bounds one export, its retries included.
	ExportTimeout time.Duration
	// FlushTimeout bounds the wait at the end for the batches still queued
	// or in flight; what is not sent by then is counted as dropped.
	FlushTimeout time.Duration
	// MaxQueue bounds the batches waiting for a slow collector; a batch
	// that finds the queue full is dropped (counted), never waited for.
	MaxQueue int
	// Service is the service.name of the spans' resource (default "latscope").
	Service string
	// OnFailure, if set, hears of each failed export as it happens, from
	// the exporter's goroutine: the error and the spans it lost.
	OnFailure func(err error, spans int)
	// OnFlush, if set, hears that the end waits up to d for the collector
	// to take the spans still queued or in flight.
	OnFlush func(d time.Duration, spans int)
}

// Stats count the exporter's work.
type Stats struct {
	Requests uint64 // request records turned into spans
	Spans    uint64 // spans exported
	Failed   uint64 // spans in exports that failed
	Dropped  uint64 // spans never sent: the queue was full, or the flush deadline passed
	LastErr  string
}

// Exporter turns request records into spans and exports them.
type Exporter struct {
	cfg   Config
	exp   *otlptrace.Exporter
	maker *spanMaker
	name  string // the session's name, on every span

	requests, spans, failed, dropped atomic.Uint64
	pending                          atomic.Int64 // spans queued or in flight
	lastErr                          atomic.Value // string
}

// New checks cfg and prepares the exporter; nothing is sent yet.
func New(ctx context.Context, cfg Config) (*Exporter, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("otlp export: no endpoint")
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp export endpoint %q: want http(s)://host:port[/v1/traces]", event.RedactURL(cfg.Endpoint))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
		cfg.Endpoint = u.String()
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Flush <= 0 {
		cfg.Flush = DefaultFlush
	}
	if cfg.ExportTimeout <= 0 {
		cfg.ExportTimeout = DefaultExportTimeout
	}
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = DefaultFlushTimeout
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.Service == "" {
		cfg.Service = "latscope"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.Endpoint), otlptracehttp.WithCompression(otlptracehttp.GzipCompression)}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp export to %s: %w", event.RedactURL(cfg.Endpoint), err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(cfg.Service))
	return &Exporter{cfg: cfg, exp: exp, maker: newSpanMaker(res)}, nil
}

// Stats returns the exporter's counters; safe from any goroutine.
func (e *Exporter) Stats() Stats {
	s := Stats{Requests: e.requests.Load(), Spans: e.spans.Load(), Failed: e.failed.Load(), Dropped: e.dropped.Load()}
	s.LastErr, _ = e.lastErr.Load().(string)
	return s
}

// Endpoint is the collector's URL with any credentials redacted.
func (e *Exporter) Endpoint() string { return event.RedactURL(e.cfg.Endpoint) }

// Run exports the request records from events until the channel closes (the
// fan-out closes it after the last event), then waits up to FlushTimeout
// for the batches still queued and shuts the exporter down. ctx does not
// stop the exports (every event is taken), but when it ends during that
// final wait (a Ctrl-C after the run's end) it cuts the wait short.
//
// Reading events never waits on the collector: batches go to a bounded
// queue that one goroutine sends, each export bounded by ExportTimeout. A
// collector that never answers costs dropped spans, counted, and at most
// FlushTimeout at the end.
func (e *Exporter) Run(ctx context.Context, events <-chan event.Event) error {
	sendCtx, stopSending := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSending()
	queue := make(chan []sdktrace.ReadOnlySpan, e.cfg.MaxQueue)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for batch := range queue {
			if sendCtx.Err() != nil { // past the flush deadline
				e.drop(batch)
				continue
			}
			e.export(sendCtx, batch)
		}
	}()
	tick := time.NewTicker(e.cfg.Flush)
	defer tick.Stop()
	var batch []sdktrace.ReadOnlySpan
	var inBatch int
	flush := func() {
		if len(batch) == 0 {
			return
		}
		e.pending.Add(int64(len(batch)))
		select {
		case queue <- batch:
		default:
			e.drop(batch) // the collector is behind: never hold up the reader
		}
		batch, inBatch = nil, 0
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				flush()
				close(queue)
				var cut <-chan struct{}
				if ctx.Err() == nil {
					cut = ctx.Done()
				}
				e.finish(sendCtx, stopSending, sent, cut)
				return nil
			}
			switch {
			case ev.Session != nil:
				e.name = ev.Session.Name
			case ev.Request != nil && ev.Request.HasFlag(event.FlagServerReported):
				// A user's request from the server's own span: the
				// server exported it already.
			case ev.Request != nil:
				batch = append(batch, e.requestSpans(ev.Request)...)
				e.requests.Add(1)
				if inBatch++; inBatch >= e.cfg.MaxBatch {
					flush()
				}
			}
		case <-tick.C:
			flush()
		}
	}
}

// finish waits up to FlushTimeout for the sender, saying so when there is
// something to wait for, then cuts the export in flight and shuts down.
func (e *Exporter) finish(sendCtx context.Context, stopSending context.CancelFunc, sent, cut <-chan struct{}) {
	deadline := time.NewTimer(e.cfg.FlushTimeout)
	defer deadline.Stop()
	if n := e.pending.Load(); n > 0 && e.cfg.OnFlush != nil {
		e.cfg.OnFlush(e.cfg.FlushTimeout, int(n))
	}
	select {
	case <-sent:
	case <-deadline.C:
		stopSending()
		<-sent // the export in flight ends with sendCtx; the rest are dropped
	case <-cut:
		stopSending()
		<-sent // the export in flight ends with sendCtx; the rest are dropped
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(sendCtx), time.Second)
	defer cancel()
	_ = e.exp.Shutdown(shutCtx)
	_ = e.maker.shutdown(shutCtx)
}

func (e *Exporter) drop(batch []sdktrace.ReadOnlySpan) {
	e.dropped.Add(uint64(len(batch)))
	e.pending.Add(-int64(len(batch)))
}

func (e *Exporter) export(ctx context.Context, batch []sdktrace.ReadOnlySpan) {
	defer e.pending.Add(-int64(len(batch)))
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ExportTimeout)
	defer cancel()
	if err := e.exp.ExportSpans(ctx, batch); err != nil {
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
			// The flush deadline cut it: not sent, rather than failed.
			e.dropped.Add(uint64(len(batch)))
			return
		}
		e.failed.Add(uint64(len(batch)))
		e.lastErr.Store(err.Error())
		if e.cfg.OnFailure != nil {
			e.cfg.OnFailure(err, len(batch))
		}
		return
	}
	e.spans.Add(uint64(len(batch)))
}

// scopeName is the instrumentation scope of every span.
const scopeName = "github.com/latscope/latscope/otlpexport"

// requestSpans builds one request's spans: the request, then each stage as a child
// laid out on the request's timeline. Client stages run back to back from
// the intended send time; the breakdown's server-side stages run back to
// back from the end of the request's write, as the breakdown divides that
// time. The decode (first token → end) is one more child.
func (e *Exporter) requestSpans(r *event.Request) []sdktrace.ReadOnlySpan {
	traceID, spanID := ids(r)
	root := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled})
	start := r.Intended
	if start.IsZero() {
		start = r.Start
	}
	end := start.Add(max(r.E2E, 0))
	attrs := []attribute.KeyValue{
		attribute.String("latscope.request_id", r.ID),
		attribute.String("latscope.outcome", string(r.Outcome)),
		attribute.String("latscope.dialect", r.Dialect),
		attribute.String("gen_ai.request.model", r.Model),
		attribute.Int("gen_ai.usage.input_tokens", r.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", r.OutputTokens),
		attribute.Float64("latscope.ttft_ms", ms(r.TTFT)),
		attribute.Float64("latscope.e2e_ms", ms(r.E2E)),
	}
	if e.name != "" {
		attrs = append(attrs, attribute.String("latscope.session", e.name))
	}
	if r.Status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", r.Status))
	}
	code, description := codes.Ok, ""
	switch {
	case r.Failed():
		code, description = codes.Error, r.Error
	case !r.OK(): // cancelled by the run's end: not an error (latscope.outcome says)
		code = codes.Unset
	}
	out := []sdktrace.ReadOnlySpan{e.maker.span("llm.request", root, trace.SpanContext{}, trace.SpanKindClient, start, end, attrs, code, description)}

	child := func(name string, from time.Time, d time.Duration, prov event.Provenance, src string) {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: childID(spanID, len(out)), TraceFlags: trace.FlagsSampled})
		a := []attribute.KeyValue{attribute.String("latscope.stage", name), attribute.String("latscope.provenance", string(prov))}
		if src != "" {
			a = append(a, attribute.String("latscope.source", src))
		}
		out = append(out, e.maker.span("stage "+name, sc, root, trace.SpanKindInternal, from, from.Add(max(d, 0)), a, codes.Unset, ""))
	}
	at := start
	var written time.Time
	for _, st := range r.Stages {
		child(string(st.Stage), at, st.Duration, st.Provenance, st.Source)
		at = at.Add(st.Duration)
		if st.Stage == event.StageWrite {
			written = at
		}
	}
	if !written.IsZero() {
		at = written
		for _, st := range r.Breakdown {
			if isClientStage(st.Stage) {
				continue // already drawn from r.Stages
			}
			child(string(st.Stage), at, st.Duration, st.Provenance, st.Source)
			at = at.Add(max(st.Duration, 0))
		}
	}
	if r.OK() && r.E2E > r.TTFT && r.TTFT > 0 {
		child("decode", start.Add(r.TTFT), r.E2E-r.TTFT, event.Measured, fmt.Sprintf("%d tokens in %d chunks", r.OutputTokens, len(r.Chunks)))
	}
	return out
}

// ids returns the request's trace and span ids as the probe sent them; a
// record without them (an old recording) gets ids derived from its request
// id, so its spans still form one trace.
func ids(r *event.Request) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	var sid trace.SpanID
	if b, err := hex.DecodeString(r.TraceID); err == nil && len(b) == 16 {
		copy(tid[:], b)
	}
	if b, err := hex.DecodeString(r.SpanID); err == nil && len(b) == 8 {
		copy(sid[:], b)
	}
	if !tid.IsValid() {
		h := fnv64(r.ID)
		for i := range 8 {
			tid[i], tid[8+i] = byte(h>>(8*i)), byte(^h>>(8*i))
		}
	}
	if !sid.IsValid() {
		h := fnv64("span:" + r.ID)
		for i := range 8 {
			sid[i] = byte(h >> (8 * i))
		}
		sid[0] |= 1
	}
	return tid, sid
}

// childID derives the n-th child's span id from the request's span id, so
// ids are unique within the trace and the same on every export.
func childID(parent trace.SpanID, n int) trace.SpanID {
	h := fnv64(hex.EncodeToString(parent[:]) + fmt.Sprint(n))
	var sid trace.SpanID
	for i := range 8 {
		sid[i] = byte(h >> (8 * i))
	}
	sid[7] |= 1
	return sid
}

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// isClientStage reports whether s is measured by the client before the
// request reaches the server (it appears in both Stages and Breakdown).
func isClientStage(s event.Stage) bool {
	switch s {
	case event.StageSchedLag, event.StageSerialize, event.StageDNS, event.StageConnect, event.StageTLS,
		event.StageConnWait, event.StageWrite, event.StageWaitHeaders, event.StageFirstToken:
		return true
	}
	return false
}
