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
)

// OTLP receiver defaults.
const (
	DefaultOTLPMaxBody    = 8 << 20 // bytes, before and after decompression
	DefaultOTLPTTL        = time.Minute
	DefaultOTLPMaxEntries = 65536
)

// Sources written into event.ServerTiming by the receiver.
const (
	SourceOTLP    = "otlp"     // vLLM llm_request span
	SourceOTLPTGI = "otlp.tgi" // TGI router span (validation/queue/inference fields)
)

const (
	contentProtobuf = "application/x-protobuf"
	contentJSON     = "application/json"
)

// OTLPConfig configures an OTLPReceiver. Zero values take the defaults.
type OTLPConfig struct {
	// Addr is the listen address for Run (--otlp-listen); empty means off.
	Addr string
	// MaxBody bounds one export body in bytes, compressed and decompressed.
	MaxBody int
	// TTL is how long a span's timing stays available for Lookup.
	TTL time.Duration
	// MaxEntries bounds how many spans are kept; the oldest go first.
	MaxEntries int
	// Now is the clock for TTL expiry; time.Now when nil.
	Now func() time.Time
}

// OTLPStats counts what the receiver has seen since it started.
type OTLPStats struct {
	Exports      uint64 // export requests that decoded (answered 200)
	Spans        uint64 // spans read in those exports
	Stored       uint64 // spans that carried request timing and were kept
	DecodeErrors uint64 // bodies that did not decode (answered 400)
	Rejected     uint64 // wrong content type or encoding, or over the size limit (415, 413)
	Evicted      uint64 // timings dropped for space before their TTL
	Entries      int    // timings held now
}

// OTLPReceiver accepts OTLP/HTTP trace exports (POST /v1/traces, protobuf or
// JSON, optionally gzip) and keeps the per-request timing of the server's
// request spans, so the attributor can join them to the probe's records by
// request id or trace id. It never emits events itself.
type OTLPReceiver struct {
	cfg   OTLPConfig
	store *timingStore

	exports, spans, stored, decodeErrors, rejected atomic.Uint64
	lastError                                      atomic.Value // string: why the last export was refused
}

// NewOTLPReceiver returns a receiver with cfg's bounds.
func NewOTLPReceiver(cfg OTLPConfig) *OTLPReceiver {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultOTLPMaxBody
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultOTLPTTL
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultOTLPMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &OTLPReceiver{cfg: cfg, store: newTimingStore(cfg.TTL, cfg.MaxEntries, cfg.Now)}
}

// Handler serves POST /v1/traces.
func (r *OTLPReceiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveTraces)
	return mux
}

// Serve answers OTLP/HTTP on ln until ctx ends, then shuts down and returns nil.
func (r *OTLPReceiver) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("otlp receiver on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutCtx); err != nil {
			srv.Close()
		}
		<-errc
		return nil
	}
}

// Run listens on the configured Addr and serves until ctx ends. It fits the
// Collector shape: timings are read through Lookup, and emit only gets
// collector markers (listening, failing to listen, and every
// otlpReportInterval in which some exports were refused).
func (r *OTLPReceiver) Run(ctx context.Context, emit func(event.Event)) error {
	if emit == nil {
		emit = func(event.Event) {}
	}
	if r.cfg.Addr == "" {
		return errors.New("otlp receiver: no listen address")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", r.cfg.Addr)
	if err != nil {
		err = fmt.Errorf("otlp receiver: %w", err)
		emit(r.marker(err.Error()))
		return err
	}
	emit(r.marker("listening for OTLP/HTTP traces on " + ln.Addr().String() + "/v1/traces"))
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	ticker := time.NewTicker(otlpReportInterval)
	defer ticker.Stop()
	var reported uint64
	for {
		select {
		case err := <-served:
			return err
		case <-ticker.C:
			if n := r.decodeErrors.Load() + r.rejected.Load(); n > reported {
				msg := fmt.Sprintf("otlp receiver refused %d export(s)", n-reported)
				if last, _ := r.lastError.Load().(string); last != "" {
					msg += "; last: " + last
				}
				emit(r.marker(msg))
				reported = n
			}
		}
	}
}

// otlpReportInterval is how often Run reports refused exports.
const otlpReportInterval = 5 * time.Second

func (r *OTLPReceiver) marker(msg string) event.Event {
	return event.NewMarker(&event.Marker{Time: r.cfg.Now(), Kind: event.MarkerCollector, Source: "collector.otlp", Message: msg})
}

// Lookup returns the timing of the span whose gen_ai.request.id is requestID,
// else of the span in trace traceID (32 hex digits). Either may be empty.
// The result is a copy the caller may keep.
func (r *OTLPReceiver) Lookup(requestID, traceID string) (*event.ServerTiming, bool) {
	if requestID != "" {
		if st, ok := r.store.get(requestKey(requestID)); ok {
			return st, true
		}
	}
	if traceID != "" {
		if st, ok := r.store.get(traceKey(strings.ToLower(traceID))); ok {
			return st, true
		}
	}
	return nil, false
}

// Stats returns the receiver's counters.
func (r *OTLPReceiver) Stats() OTLPStats {
	evicted, entries := r.store.stats()
	return OTLPStats{
		Exports:      r.exports.Load(),
		Spans:        r.spans.Load(),
		Stored:       r.stored.Load(),
		DecodeErrors: r.decodeErrors.Load(),
		Rejected:     r.rejected.Load(),
		Evicted:      evicted,
		Entries:      entries,
	}
}

func (r *OTLPReceiver) serveTraces(w http.ResponseWriter, req *http.Request) {
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

// ingest stores the timing of every request span in export.
func (r *OTLPReceiver) ingest(export *coltracepb.ExportTraceServiceRequest) {
	for _, rs := range export.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, span := range ss.GetSpans() {
				r.spans.Add(1)
				st, requestID, ok := spanTiming(span)
				if !ok {
					continue
				}
				var keys []string
				if requestID != "" {
					keys = append(keys, requestKey(requestID))
					// vLLM names the engine request "chatcmpl-<X-Request-Id>" or
					// "cmpl-<X-Request-Id>"; the probe knows only the header value.
					for _, prefix := range []string{"chatcmpl-", "cmpl-"} {
						if base, found := strings.CutPrefix(requestID, prefix); found && base != "" {
							keys = append(keys, requestKey(base))
						}
					}
				}
				if tid := span.GetTraceId(); len(tid) == 16 && !allZero(tid) {
					keys = append(keys, traceKey(hex.EncodeToString(tid)))
				}
				if len(keys) == 0 {
					continue
				}
				r.stored.Add(1)
				r.store.put(keys, st)
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
	vllm := &event.ServerTiming{Source: SourceOTLP, Stages: map[event.Stage]time.Duration{}}
	tgi := &event.ServerTiming{Source: SourceOTLPTGI, Stages: map[event.Stage]time.Duration{}}
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

func requestKey(id string) string { return "r:" + id }
func traceKey(id string) string   { return "t:" + id }

// timingStore is a bounded map of span timings with a TTL. Entries expire in
// insertion order (one TTL for all), so a FIFO queue finds the oldest.
type timingStore struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	byKey   map[string]*storedTiming
	fifo    []*storedTiming // oldest first; fifo[head:] are live
	head    int
	evicted uint64
}

type storedTiming struct {
	timing *event.ServerTiming
	at     time.Time
	keys   []string
}

func newTimingStore(ttl time.Duration, max int, now func() time.Time) *timingStore {
	return &timingStore{ttl: ttl, max: max, now: now, byKey: map[string]*storedTiming{}}
}

func (s *timingStore) put(keys []string, st *event.ServerTiming) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expireLocked(now)
	for s.len() >= s.max {
		s.dropOldestLocked()
		s.evicted++
	}
	e := &storedTiming{timing: st, at: now, keys: keys}
	for _, k := range keys {
		s.byKey[k] = e
	}
	s.fifo = append(s.fifo, e)
}

func (s *timingStore) get(key string) (*event.ServerTiming, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.now())
	e, ok := s.byKey[key]
	if !ok {
		return nil, false
	}
	return cloneTiming(e.timing), true
}

func (s *timingStore) stats() (evicted uint64, entries int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.now())
	return s.evicted, s.len()
}

func (s *timingStore) len() int { return len(s.fifo) - s.head }

func (s *timingStore) expireLocked(now time.Time) {
	for s.len() > 0 && now.Sub(s.fifo[s.head].at) >= s.ttl {
		s.dropOldestLocked()
	}
}

func (s *timingStore) dropOldestLocked() {
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
