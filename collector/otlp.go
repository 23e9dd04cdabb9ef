package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/eventclock"
)

// OTLP receiver defaults.
const (
	DefaultOTLPMaxBody    = 8 << 20 // bytes, before and after decompression
	DefaultOTLPConcurrent = 4       // exports read at once; more get 429
	DefaultOTLPReadTime   = 30 * time.Second
)

const (
	contentProtobuf = "application/x-protobuf"
	contentJSON     = "application/json"
)

// OTLPConfig configures an OTLPReceiver. Zero values take the defaults.
type OTLPConfig struct {
	// Addr is the listen address (--otlp-listen), used when Listener is nil.
	Addr string
	// Listener, when set, is served instead of listening on Addr.
	Listener net.Listener
	// MaxBody bounds one export body in bytes, compressed and decompressed.
	MaxBody int
	// MaxConcurrent bounds the exports being read and decoded at once, so
	// that many slow or large exports cannot hold memory without bound
	// (memory stays under about 2 × MaxBody × MaxConcurrent); more are
	// answered 429, which OTLP exporters retry.
	MaxConcurrent int
	// ReadTimeout bounds reading one export, headers and body.
	ReadTimeout time.Duration
	// Now is the clock for event times; time.Now when nil.
	Now func() time.Time
}

// OTLPStats counts what the receiver has seen since it started.
type OTLPStats struct {
	Exports      uint64 // export requests that decoded (answered 200)
	Spans        uint64 // spans read in those exports
	Emitted      uint64 // spans that carried request timing, emitted as span events
	DecodeErrors uint64 // bodies that did not decode (answered 400)
	Rejected     uint64 // wrong content type or encoding, over the size limit, or too many at once (415, 413, 429)
}

// OTLPReceiver is a source of span events: it accepts OTLP/HTTP trace
// exports (POST /v1/traces, protobuf or JSON, optionally gzip) and emits the
// per-request timing of the server's request spans as event.Span records,
// which the attributor joins to the probe's requests by request id or trace
// id. Refused exports are reported as collector markers.
type OTLPReceiver struct {
	cfg  OTLPConfig
	slot chan struct{} // one token per export being read

	// emitMu guards emit: handlers emit while Run runs, and Run waits for
	// them before it returns, so no span is emitted after the pipeline closes.
	emitMu sync.RWMutex
	emit   func(event.Event)

	// orderMu is held while an event is stamped and emitted, so that the
	// receiver's events (spans from concurrent exports, and its markers)
	// leave in the order of their times.
	orderMu sync.Mutex
	clock   eventclock.Clock

	exports, spans, emitted, decodeErrors, rejected atomic.Uint64
	lastError                                       atomic.Value // string: why the last export was refused
}

// NewOTLPReceiver returns a receiver with cfg's bounds.
func NewOTLPReceiver(cfg OTLPConfig) *OTLPReceiver {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultOTLPMaxBody
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultOTLPConcurrent
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultOTLPReadTime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &OTLPReceiver{cfg: cfg, slot: make(chan struct{}, cfg.MaxConcurrent), clock: eventclock.New(cfg.Now)}
}

// Handler serves POST /v1/traces. Spans are emitted only while Run runs.
func (r *OTLPReceiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveTraces)
	return mux
}

// Run listens (or serves the configured Listener) until ctx ends, emitting a
// span event for every request span received and collector markers: where it
// listens, why it cannot, and every otlpReportInterval (and at the end) how
// many exports it refused and why.
func (r *OTLPReceiver) Run(ctx context.Context, emit func(event.Event)) error {
	if emit == nil {
		return errors.New("otlp receiver: no emit function")
	}
	ln := r.cfg.Listener
	if ln == nil {
		if r.cfg.Addr == "" {
			return errors.New("otlp receiver: no listen address")
		}
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(ctx, "tcp", r.cfg.Addr); err != nil {
			err = fmt.Errorf("otlp receiver: %w", err)
			r.emitMarker(emit, event.MarkerCollector, err.Error())
			return err
		}
	}
	r.setEmit(emit)
	defer r.setEmit(nil) // waits for handlers still emitting

	r.emitMarker(emit, event.MarkerNote, "listening for OTLP/HTTP traces on http://"+ln.Addr().String()+"/v1/traces")
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: r.cfg.ReadTimeout}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ticker := time.NewTicker(otlpReportInterval)
	defer ticker.Stop()
	var reported uint64
	report := func() {
		if n := r.decodeErrors.Load() + r.rejected.Load(); n > reported {
			msg := fmt.Sprintf("otlp receiver refused %d export(s)", n-reported)
			if last, _ := r.lastError.Load().(string); last != "" {
				msg += "; last: " + last
			}
			r.emitMarker(emit, event.MarkerCollector, msg)
			reported = n
		}
	}
	for {
		select {
		case err := <-served:
			report()
			return fmt.Errorf("otlp receiver on %s: %w", ln.Addr(), err)
		case <-ticker.C:
			report()
		case <-ctx.Done():
			shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := srv.Shutdown(shutCtx); err != nil {
				srv.Close()
			}
			cancel()
			<-served
			report()
			return nil
		}
	}
}

// otlpReportInterval is how often Run reports refused exports.
const otlpReportInterval = 5 * time.Second

// stampAndEmit stamps an event with the receiver's clock and emits it, both
// under orderMu.
func (r *OTLPReceiver) stampAndEmit(emit func(event.Event), build func(now time.Time) event.Event) {
	r.orderMu.Lock()
	defer r.orderMu.Unlock()
	emit(build(r.clock.Now()))
}

func (r *OTLPReceiver) emitMarker(emit func(event.Event), kind event.MarkerKind, msg string) {
	r.stampAndEmit(emit, func(now time.Time) event.Event {
		return event.NewMarker(&event.Marker{Time: now, Kind: kind, Source: "collector.otlp", Message: msg})
	})
}

// setEmit sets where spans go; nil stops emitting, once the handlers
// emitting now have finished.
func (r *OTLPReceiver) setEmit(emit func(event.Event)) {
	r.emitMu.Lock()
	r.emit = emit
	r.emitMu.Unlock()
}

// publish emits a span, stamped as it leaves, if Run is running.
func (r *OTLPReceiver) publish(sp *event.Span) bool {
	r.emitMu.RLock()
	defer r.emitMu.RUnlock()
	if r.emit == nil {
		return false
	}
	r.stampAndEmit(r.emit, func(now time.Time) event.Event {
		sp.Time = now
		return event.NewSpan(sp)
	})
	return true
}

// Stats returns the receiver's counters.
func (r *OTLPReceiver) Stats() OTLPStats {
	return OTLPStats{
		Exports:      r.exports.Load(),
		Spans:        r.spans.Load(),
		Emitted:      r.emitted.Load(),
		DecodeErrors: r.decodeErrors.Load(),
		Rejected:     r.rejected.Load(),
	}
}

func (r *OTLPReceiver) serveTraces(w http.ResponseWriter, req *http.Request) {
	select {
	case r.slot <- struct{}{}:
		defer func() { <-r.slot }()
	default:
		msg := fmt.Sprintf("busy: %d exports are being read; retry", cap(r.slot))
		r.rejected.Add(1)
		r.lastError.Store(msg)
		w.Header().Set("Retry-After", "1")
		http.Error(w, msg, http.StatusTooManyRequests)
		return
	}
	mediaType, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || (mediaType != contentProtobuf && mediaType != contentJSON) {
		msg := fmt.Sprintf("unsupported content type %q: send %s or %s", req.Header.Get("Content-Type"), contentProtobuf, contentJSON)
		r.rejected.Add(1)
		r.lastError.Store(msg)
		http.Error(w, msg, http.StatusUnsupportedMediaType)
		return
	}
	body, status, err := readBody(w, req, r.cfg.MaxBody)
	if err != nil {
		r.lastError.Store(err.Error())
		if status == http.StatusBadRequest {
			r.decodeErrors.Add(1)
		} else {
			r.rejected.Add(1)
		}
		writeStatus(w, mediaType, status, err.Error())
		return
	}
	export, err := decodeExport(mediaType, body)
	if err != nil {
		r.decodeErrors.Add(1)
		r.lastError.Store(err.Error())
		writeStatus(w, mediaType, http.StatusBadRequest, err.Error())
		return
	}
	r.exports.Add(1)
	r.ingest(export)
	writeOK(w, mediaType)
}

// readBody reads the whole body within limit, undoing gzip. On failure it
// returns the HTTP status to answer with.
func readBody(w http.ResponseWriter, req *http.Request, limit int) ([]byte, int, error) {
	var src io.Reader = http.MaxBytesReader(w, req.Body, int64(limit))
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, bodyErrStatus(err), fmt.Errorf("read gzip body: %w", err)
		}
		defer zr.Close()
		src = zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("unsupported content encoding %q: send gzip or none", enc)
	}
	body, err := io.ReadAll(io.LimitReader(src, int64(limit)+1))
	if err != nil {
		return nil, bodyErrStatus(err), fmt.Errorf("read body: %w", err)
	}
	if len(body) > limit {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes after decompression", limit)
	}
	return body, http.StatusOK, nil
}

func bodyErrStatus(err error) int {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// decodeExport decodes an ExportTraceServiceRequest in either OTLP encoding.
func decodeExport(mediaType string, body []byte) (*coltracepb.ExportTraceServiceRequest, error) {
	var export coltracepb.ExportTraceServiceRequest
	if mediaType == contentJSON {
		fixed, err := hexIDsToBase64(body)
		if err != nil {
			return nil, fmt.Errorf("decode otlp/json export: %w", err)
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(fixed, &export); err != nil {
			return nil, fmt.Errorf("decode otlp/json export: %w", err)
		}
		return &export, nil
	}
	if err := proto.Unmarshal(body, &export); err != nil {
		return nil, fmt.Errorf("decode otlp/protobuf export: %w", err)
	}
	return &export, nil
}

// idFields are the byte fields that OTLP/JSON writes as hex, where the plain
// protobuf JSON mapping (protojson) expects base64.
var idFields = map[string]int{
	"traceId": 16, "trace_id": 16,
	"spanId": 8, "span_id": 8,
	"parentSpanId": 8, "parent_span_id": 8,
}

// hexIDsToBase64 rewrites the hex trace and span ids of an OTLP/JSON body
// into base64 so protojson reads them as the spec means. Values of another
// length (e.g. already base64) are left alone. Numbers are kept verbatim.
func hexIDsToBase64(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the json object")
	}
	fixIDs(doc, 0)
	return json.Marshal(doc)
}

func fixIDs(v any, depth int) {
	if depth > 64 { // protojson refuses deeper documents anyway
		return
	}
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if n, ok := idFields[k]; ok {
				if s, ok := child.(string); ok && len(s) == 2*n {
					if b, err := hex.DecodeString(s); err == nil {
						v[k] = base64.StdEncoding.EncodeToString(b)
						continue
					}
				}
			}
			fixIDs(child, depth+1)
		}
	case []any:
		for _, child := range v {
			fixIDs(child, depth+1)
		}
	}
}

// writeOK answers with an empty ExportTraceServiceResponse in the request's encoding.
func writeOK(w http.ResponseWriter, mediaType string) {
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(http.StatusOK)
	if mediaType == contentJSON {
		io.WriteString(w, "{}")
	}
	// The protobuf encoding of an empty message is zero bytes.
}

// writeStatus answers with a google.rpc.Status in the request's encoding, as
// the OTLP/HTTP spec asks for failures.
func writeStatus(w http.ResponseWriter, mediaType string, status int, msg string) {
	code := int32(3) // INVALID_ARGUMENT
	if status == http.StatusRequestEntityTooLarge {
		code = 8 // RESOURCE_EXHAUSTED
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(status)
	if mediaType == contentJSON {
		b, _ := json.Marshal(struct {
			Code    int32  `json:"code"`
			Message string `json:"message"`
		}{code, msg})
		w.Write(b)
		return
	}
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(code))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, msg)
	w.Write(b)
}

// ingest emits the timing of every request span in export.
func (r *OTLPReceiver) ingest(export *coltracepb.ExportTraceServiceRequest) {
	for _, rs := range export.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, span := range ss.GetSpans() {
				r.spans.Add(1)
				st, requestID, ok := spanTiming(span)
				if !ok {
					continue
				}
				sp := &event.Span{RequestID: requestID, Timing: *st}
				if ns := span.GetEndTimeUnixNano(); ns > 0 && ns < math.MaxInt64 {
					sp.End = time.Unix(0, int64(ns)).UTC()
				}
				if tid := span.GetTraceId(); len(tid) == 16 && !allZero(tid) {
					sp.TraceID = hex.EncodeToString(tid)
				}
				if sp.RequestID == "" && sp.TraceID == "" {
					continue
				}
				if r.publish(sp) {
					r.emitted.Add(1)
				}
			}
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// vLLM span attributes (vllm/tracing.py SpanAttributes), in seconds.
var vllmLatencyAttrs = map[string]event.Stage{
	"gen_ai.latency.time_to_first_token":     event.StageServerTTFT,
	"gen_ai.latency.e2e":                     event.StageServerE2E,
	"gen_ai.latency.time_in_queue":           event.StageQueue,
	"gen_ai.latency.time_in_model_prefill":   event.StagePrefill, // scheduled → first token: includes the first decode step
	"gen_ai.latency.time_in_model_decode":    event.StageDecode,
	"gen_ai.latency.time_in_model_inference": event.StageInference,
}

// TGI router span fields, recorded as Rust Debug duration strings ("12.3ms").
var tgiDurationAttrs = map[string]event.Stage{
	"validation_time": event.StageTokenize, // validation includes tokenization
	"queue_time":      event.StageQueue,
	"inference_time":  event.StageInference, // prefill + decode
	"total_time":      event.StageServerE2E,
}

// spanTiming reads one span's request timing: a vLLM llm_request span (any
// span with gen_ai.latency attributes) or a TGI span with its duration
// fields. ok is false for spans that carry none.
func spanTiming(span *tracepb.Span) (st *event.ServerTiming, requestID string, ok bool) {
	vllm := &event.ServerTiming{Source: event.SourceOTLP, Stages: map[event.Stage]time.Duration{}}
	tgi := &event.ServerTiming{Source: event.SourceOTLPTGI, Stages: map[event.Stage]time.Duration{}}
	for _, kv := range span.GetAttributes() {
		key, val := kv.GetKey(), kv.GetValue()
		if stage, ok := vllmLatencyAttrs[key]; ok {
			if secs, ok := attrFloat(val); ok {
				if d, ok := secondsToDuration(secs); ok {
					vllm.Stages[stage] = d
				}
			}
			continue
		}
		if stage, ok := tgiDurationAttrs[key]; ok {
			if d, err := time.ParseDuration(val.GetStringValue()); err == nil && d >= 0 {
				tgi.Stages[stage] = d
			}
			continue
		}
		switch key {
		case "gen_ai.request.id":
			requestID = attrString(val)
		case "gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens":
			if n, ok := attrFloat(val); ok && n >= 0 && n < 1<<31 {
				vllm.PromptTokens = int(n)
			}
		case "gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens":
			if n, ok := attrFloat(val); ok && n >= 0 && n < 1<<31 {
				vllm.OutputTokens = int(n)
			}
		}
	}
	switch {
	case len(vllm.Stages) > 0:
		return vllm, requestID, true
	case len(tgi.Stages) > 0:
		return tgi, requestID, true
	}
	return nil, "", false
}

// attrFloat reads a numeric attribute sent as double, int or a decimal string.
func attrFloat(v *commonpb.AnyValue) (float64, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue, true
	case *commonpb.AnyValue_IntValue:
		return float64(x.IntValue), true
	case *commonpb.AnyValue_StringValue:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x.StringValue), 64); err == nil {
			return f, true
		}
	}
	return 0, false
}

func attrString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	}
	return ""
}

// secondsToDuration converts, refusing negative, NaN and absurd values
// (over a day) that would overflow or mean nothing.
func secondsToDuration(s float64) (time.Duration, bool) {
	if !(s >= 0 && s <= 86400) {
		return 0, false
	}
	return time.Duration(s*1e9 + 0.5), true
}
