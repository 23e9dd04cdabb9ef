package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/latscope/latscope/event"
)

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func dblAttr(k string, v float64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
}

func intAttr(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

// traceIDOf makes a distinct 16-byte trace id from n.
func traceIDOf(n byte) []byte {
	id := make([]byte, 16)
	id[0], id[15] = 0xab, n
	return id
}

// vllmSpan is an llm_request span as vLLM's do_tracing writes it.
func vllmSpan(requestID string, traceID []byte) *tracepb.Span {
	return &tracepb.Span{
		TraceId: traceID,
		SpanId:  []byte{1, 2, 3, 4, 5, 6, 7, 8},
		Name:    "llm_request",
		Kind:    tracepb.Span_SPAN_KIND_SERVER,
		Attributes: []*commonpb.KeyValue{
			strAttr("gen_ai.request.id", requestID),
			dblAttr("gen_ai.latency.time_to_first_token", 0.0305),
			dblAttr("gen_ai.latency.time_in_queue", 0.0021),
			dblAttr("gen_ai.latency.time_in_model_prefill", 0.0254),
			dblAttr("gen_ai.latency.time_in_model_decode", 1.2),
			dblAttr("gen_ai.latency.time_in_model_inference", 1.2254),
			intAttr("gen_ai.latency.e2e", 2), // an int where a double is usual
			intAttr("gen_ai.usage.prompt_tokens", 42),
			dblAttr("gen_ai.usage.completion_tokens", 128),
		},
	}
}

func exportOf(spans ...*tracepb.Span) *coltracepb.ExportTraceServiceRequest {
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
}

func wantVLLMTiming() *event.ServerTiming {
	return &event.ServerTiming{
		Source: SourceOTLP,
		Stages: map[event.Stage]time.Duration{
			event.StageServerTTFT: 30500 * time.Microsecond,
			event.StageQueue:      2100 * time.Microsecond,
			event.StagePrefill:    25400 * time.Microsecond,
			event.StageDecode:     1200 * time.Millisecond,
			event.StageInference:  1225400 * time.Microsecond,
			event.StageServerE2E:  2 * time.Second,
		},
		PromptTokens: 42,
		OutputTokens: 128,
	}
}

func checkTiming(t *testing.T, got, want *event.ServerTiming) {
	t.Helper()
	if got.Source != want.Source || got.PromptTokens != want.PromptTokens || got.OutputTokens != want.OutputTokens {
		t.Errorf("timing = %+v, want %+v", got, want)
	}
	if len(got.Stages) != len(want.Stages) {
		t.Errorf("stages = %v, want %v", got.Stages, want.Stages)
	}
	for k, w := range want.Stages {
		if g := got.Stages[k]; g != w {
			t.Errorf("stage %s = %v, want %v", k, g, w)
		}
	}
}

type postResult struct {
	status      int
	contentType string
	body        []byte
}

func post(t *testing.T, h http.Handler, contentType, encoding string, body []byte) postResult {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return postResult{rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestOTLPReceiverEncodings(t *testing.T) {
	t.Parallel()
	export := exportOf(vllmSpan("chatcmpl-req-1", traceIDOf(1)))
	pb, err := proto.Marshal(export)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(export) // base64 ids, as protojson writes them
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, contentType, encoding string
		body                        []byte
	}{
		{"protobuf", "application/x-protobuf", "", pb},
		{"protobuf gzip", "application/x-protobuf", "gzip", gzipped(t, pb)},
		{"json", "application/json", "", js},
		{"json with charset, gzip", "application/json; charset=utf-8", "gzip", gzipped(t, js)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := NewOTLPReceiver(OTLPConfig{})
			got := post(t, r.Handler(), tc.contentType, tc.encoding, tc.body)
			if got.status != http.StatusOK {
				t.Fatalf("status = %d (%s), want 200", got.status, got.body)
			}
			wantType, _, _ := strings.Cut(tc.contentType, ";")
			if got.contentType != wantType {
				t.Errorf("response content type = %q, want %q", got.contentType, wantType)
			}
			var resp coltracepb.ExportTraceServiceResponse
			if wantType == contentJSON {
				err = protojson.Unmarshal(got.body, &resp)
			} else {
				err = proto.Unmarshal(got.body, &resp)
			}
			if err != nil || resp.GetPartialSuccess() != nil {
				t.Errorf("response %q is not an empty ExportTraceServiceResponse (%v)", got.body, err)
			}

			byID, ok := r.Lookup("req-1", "")
			if !ok {
				t.Fatal("no timing by X-Request-Id (span names it chatcmpl-req-1)")
			}
			checkTiming(t, byID, wantVLLMTiming())
			if _, ok := r.Lookup("chatcmpl-req-1", ""); !ok {
				t.Error("no timing by the full vLLM request id")
			}
			byTrace, ok := r.Lookup("", strings.ToUpper(hex.EncodeToString(traceIDOf(1))))
			if !ok {
				t.Fatal("no timing by trace id")
			}
			checkTiming(t, byTrace, wantVLLMTiming())
			if _, ok := r.Lookup("other", hex.EncodeToString(traceIDOf(2))); ok {
				t.Error("found a timing for an unknown request")
			}
			if s := r.Stats(); s.Exports != 1 || s.Spans != 1 || s.Stored != 1 || s.Entries != 1 {
				t.Errorf("stats = %+v", s)
			}
		})
	}
}

func TestOTLPReceiverSpecJSONFixtures(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "otlp", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r := NewOTLPReceiver(OTLPConfig{})
	for _, name := range []string{"vllm_llm_request.json", "tgi_generate_stream.json"} {
		if got := post(t, r.Handler(), "application/json", "", read(name)); got.status != http.StatusOK {
			t.Fatalf("%s: status = %d (%s)", name, got.status, got.body)
		}
	}
	// Hex ids per the OTLP/JSON spec, in upper case in the fixture.
	vllm, ok := r.Lookup("", "5b8efff798038103d269b633813fc60c")
	if !ok {
		t.Fatal("vLLM span not found by its hex trace id")
	}
	checkTiming(t, vllm, wantVLLMTiming())
	if _, ok := r.Lookup("json-1", ""); !ok {
		t.Error("vLLM span not found by request id")
	}
	tgi, ok := r.Lookup("", "4bf92f3577b34da6a3ce929d0e0e4736")
	if !ok {
		t.Fatal("TGI span not found by trace id")
	}
	checkTiming(t, tgi, &event.ServerTiming{Source: SourceOTLPTGI, Stages: map[event.Stage]time.Duration{
		event.StageTokenize:  850 * time.Microsecond,
		event.StageQueue:     12300 * time.Microsecond,
		event.StageInference: 1186850 * time.Microsecond,
		event.StageServerE2E: 1200 * time.Millisecond,
	}})
	if s := r.Stats(); s.Spans != 3 || s.Stored != 2 {
		t.Errorf("stats = %+v, want 3 spans read, 2 stored", s)
	}
}

func TestOTLPReceiverRejects(t *testing.T) {
	t.Parallel()
	r := NewOTLPReceiver(OTLPConfig{MaxBody: 4096})
	h := r.Handler()
	good, _ := proto.Marshal(exportOf(vllmSpan("after", traceIDOf(9))))
	big := bytes.Repeat([]byte{'x'}, 5000)
	cases := []struct {
		name, contentType, encoding string
		body                        []byte
		status                      int
		inBody                      string
	}{
		{"garbage protobuf", "application/x-protobuf", "", []byte{0xff, 0xff, 0xff, 0x01, 0x02}, 400, "decode otlp/protobuf"},
		{"garbage json", "application/json", "", []byte(`{"resourceSpans": [`), 400, "decode otlp/json"},
		{"json of the wrong shape", "application/json", "", []byte(`{"resourceSpans": {"x": 1}}`), 400, "decode otlp/json"},
		{"json with trailing data", "application/json", "", []byte(`{} {}`), 400, "trailing data"},
		{"broken gzip", "application/x-protobuf", "gzip", []byte("not gzip"), 400, "gzip"},
		{"text", "text/plain", "", good, 415, "unsupported content type"},
		{"no content type", "", "", good, 415, "unsupported content type"},
		{"deflate", "application/x-protobuf", "deflate", good, 415, "unsupported content encoding"},
		{"too large", "application/x-protobuf", "", big, 413, ""},
		{"too large after gunzip", "application/x-protobuf", "gzip", gzipped(t, big), 413, "after decompression"},
	}
	for _, tc := range cases {
		got := post(t, h, tc.contentType, tc.encoding, tc.body)
		if got.status != tc.status {
			t.Errorf("%s: status = %d (%s), want %d", tc.name, got.status, got.body, tc.status)
		}
		if !bytes.Contains(got.body, []byte(tc.inBody)) {
			t.Errorf("%s: body %q does not say %q", tc.name, got.body, tc.inBody)
		}
	}
	// The 400 answer is a google.rpc.Status in the request's encoding.
	got := post(t, h, "application/json", "", []byte("nope"))
	if !bytes.Contains(got.body, []byte(`"code":3`)) || got.contentType != contentJSON {
		t.Errorf("json 400 body = %q (%s), want a Status with code 3", got.body, got.contentType)
	}

	if got := post(t, h, "application/x-protobuf", "", good); got.status != http.StatusOK {
		t.Fatalf("after bad bodies: status = %d, want 200", got.status)
	}
	if _, ok := r.Lookup("after", ""); !ok {
		t.Error("receiver stopped storing after bad bodies")
	}
	s := r.Stats()
	if s.DecodeErrors != 6 || s.Rejected != 5 || s.Exports != 1 {
		t.Errorf("stats = %+v, want 6 decode errors, 5 rejected, 1 export", s)
	}

	req := httptest.NewRequest(http.MethodGet, "/v1/traces", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: status = %d, want 405", rec.Code)
	}
}

// fakeClock is a settable clock for TTL tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestOTLPReceiverBounds(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1767000000, 0)}
	r := NewOTLPReceiver(OTLPConfig{TTL: time.Minute, MaxEntries: 3, Now: clock.Now})
	send := func(ids ...string) {
		t.Helper()
		var spans []*tracepb.Span
		for i, id := range ids {
			spans = append(spans, vllmSpan(id, traceIDOf(byte(len(id)+i))))
		}
		b, _ := proto.Marshal(exportOf(spans...))
		if got := post(t, r.Handler(), contentProtobuf, "", b); got.status != 200 {
			t.Fatalf("status %d", got.status)
		}
	}

	send("a", "b", "c", "d", "e")
	for _, id := range []string{"a", "b"} {
		if _, ok := r.Lookup(id, ""); ok {
			t.Errorf("%s kept past MaxEntries", id)
		}
	}
	for _, id := range []string{"c", "d", "e"} {
		if _, ok := r.Lookup(id, ""); !ok {
			t.Errorf("%s lost", id)
		}
	}
	if s := r.Stats(); s.Entries != 3 || s.Evicted != 2 {
		t.Errorf("stats = %+v, want 3 entries, 2 evicted", s)
	}

	clock.Add(40 * time.Second)
	send("f")                   // the store is full: c goes for space
	clock.Add(30 * time.Second) // c, d, e are 70 s old; f is 30 s old
	for _, id := range []string{"c", "d", "e"} {
		if _, ok := r.Lookup(id, ""); ok {
			t.Errorf("%s kept past its TTL", id)
		}
	}
	if _, ok := r.Lookup("f", ""); !ok {
		t.Error("f expired early")
	}
	if s := r.Stats(); s.Entries != 1 || s.Evicted != 3 {
		t.Errorf("stats = %+v, want 1 entry, 3 evicted", s)
	}

	// A request id reused by a later span: the newer timing wins, and the
	// older one's expiry does not remove it.
	send("g")
	clock.Add(10 * time.Second)
	send("g")
	clock.Add(55 * time.Second) // first g expired, second g is 55 s old
	if _, ok := r.Lookup("g", ""); !ok {
		t.Error("re-sent id lost when its older entry expired")
	}

	// Many exports through a small store never grow it past its bound.
	for i := range 200 {
		send(strings.Repeat("x", i%7+1), "y")
	}
	if s := r.Stats(); s.Entries > 3 {
		t.Errorf("entries = %d, want <= 3", s.Entries)
	}
	r.store.mu.Lock()
	keys, backing := len(r.store.byKey), cap(r.store.fifo)
	r.store.mu.Unlock()
	if keys > 3*3 || backing > 256 {
		t.Errorf("store holds %d keys, fifo capacity %d: not bounded", keys, backing)
	}
}

// TestOTLPReceiverWithSDKExporter sends a span through the real OpenTelemetry
// Go SDK and its OTLP/HTTP exporter (protobuf, gzip) over loopback.
func TestOTLPReceiverWithSDKExporter(t *testing.T) {
	t.Parallel()
	r := NewOTLPReceiver(OTLPConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()

	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpoint(ln.Addr().String()),
		otlptracehttp.WithInsecure(),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
	)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	parent := trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	_, span := tp.Tracer("vllm.llm_engine").Start(parent, "llm_request", trace.WithSpanKind(trace.SpanKindServer))
	span.SetAttributes(
		attribute.String("gen_ai.request.id", "cmpl-sdk-1"),
		attribute.Float64("gen_ai.latency.time_in_queue", 0.004),
		attribute.Float64("gen_ai.latency.time_in_model_prefill", 0.011),
		attribute.Float64("gen_ai.latency.time_to_first_token", 0.017),
		attribute.Int("gen_ai.usage.prompt_tokens", 7),
	)
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("exporter: %v", err)
	}

	got, ok := r.Lookup("nothing", "0af7651916cd43dd8448eb211c80319c")
	if !ok {
		t.Fatalf("span not found by trace id; stats %+v", r.Stats())
	}
	checkTiming(t, got, &event.ServerTiming{Source: SourceOTLP, PromptTokens: 7, Stages: map[event.Stage]time.Duration{
		event.StageQueue: 4 * time.Millisecond, event.StagePrefill: 11 * time.Millisecond, event.StageServerTTFT: 17 * time.Millisecond,
	}})
	if _, ok := r.Lookup("sdk-1", ""); !ok {
		t.Error("span not found by request id")
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestOTLPReceiverRun(t *testing.T) {
	t.Parallel()
	if err := NewOTLPReceiver(OTLPConfig{}).Run(context.Background(), nil); err == nil {
		t.Error("Run without an address succeeded")
	}

	var markers []string
	emit := func(ev event.Event) {
		if ev.Marker == nil || ev.Marker.Kind != event.MarkerCollector {
			t.Errorf("emitted %+v, want only collector markers", ev)
			return
		}
		markers = append(markers, ev.Marker.Message)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := NewOTLPReceiver(OTLPConfig{Addr: "127.0.0.1:0"}).Run(ctx, emit); err != nil {
		t.Errorf("Run until ctx ends = %v, want nil", err)
	}
	if len(markers) != 1 || !strings.Contains(markers[0], "listening") {
		t.Errorf("markers = %q, want one saying where it listens", markers)
	}

	markers = nil
	if err := NewOTLPReceiver(OTLPConfig{Addr: "127.0.0.1:-1"}).Run(context.Background(), emit); err == nil {
		t.Error("Run on a bad address succeeded")
	}
	if len(markers) != 1 || !strings.Contains(markers[0], "otlp receiver") {
		t.Errorf("markers = %q, want one naming the failure", markers)
	}
}

func FuzzOTLPDecode(f *testing.F) {
	pb, _ := proto.Marshal(exportOf(vllmSpan("chatcmpl-f", traceIDOf(3))))
	js, _ := protojson.Marshal(exportOf(vllmSpan("f", traceIDOf(4))))
	f.Add(pb)
	f.Add(js)
	for _, name := range []string{"vllm_llm_request.json", "tgi_generate_stream.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "otlp", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","attributes":[{"key":"gen_ai.latency.e2e","value":{"stringValue":"NaN"}}]}]}]}]}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		r := NewOTLPReceiver(OTLPConfig{MaxEntries: 16, MaxBody: 1 << 16})
		h := r.Handler()
		for _, ct := range []string{contentProtobuf, contentJSON} {
			got := post(t, h, ct, "", body)
			if got.status != http.StatusOK && got.status != http.StatusBadRequest && got.status != http.StatusRequestEntityTooLarge {
				t.Fatalf("%s: status %d", ct, got.status)
			}
			if got.status == http.StatusBadRequest && len(got.body) == 0 {
				t.Fatalf("%s: 400 without a message", ct)
			}
		}
		post(t, h, contentProtobuf, "gzip", body)
		r.Lookup("f", hex.EncodeToString(traceIDOf(3)))
	})
}
