package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
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
		Source: event.SourceOTLP,
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

// spanSink collects what a receiver emits, as Run would pass it on.
type spanSink struct {
	mu     sync.Mutex
	spans  []*event.Span
	others []event.Event
}

func captureSpans(r *OTLPReceiver) *spanSink {
	s := &spanSink{}
	r.setEmit(func(ev event.Event) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ev.Span != nil {
			s.spans = append(s.spans, ev.Span)
		} else {
			s.others = append(s.others, ev)
		}
	})
	return s
}

// find returns the span emitted with this request id or trace id.
func (s *spanSink) find(requestID, traceID string) (*event.Span, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.spans {
		if requestID != "" && sp.RequestID == requestID || traceID != "" && strings.EqualFold(sp.TraceID, traceID) {
			return sp, true
		}
	}
	return nil, false
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
			sink := captureSpans(r)
			got := post(t, r.Handler(), tc.contentType, tc.encoding, tc.body)
			if got.status != http.StatusOK {
				t.Fatalf("status = %d (%s), want 200", got.status, got.body)
			}
			wantType, _, _ := strings.Cut(tc.contentType, ";")
			if got.contentType != wantType {
				t.Errorf("response content type = %q, want %q", got.contentType, wantType)
			}
			var resp coltracepb.ExportTraceServiceResponse
			var err error // this subtest's own: the subtests run in parallel
			if wantType == contentJSON {
				err = protojson.Unmarshal(got.body, &resp)
			} else {
				err = proto.Unmarshal(got.body, &resp)
			}
			if err != nil || resp.GetPartialSuccess() != nil {
				t.Errorf("response %q is not an empty ExportTraceServiceResponse (%v)", got.body, err)
			}

			sp, ok := sink.find("chatcmpl-req-1", "")
			if !ok {
				t.Fatal("no span emitted with the vLLM request id")
			}
			checkTiming(t, &sp.Timing, wantVLLMTiming())
			if sp.TraceID != hex.EncodeToString(traceIDOf(1)) {
				t.Errorf("trace id %q, want %x", sp.TraceID, traceIDOf(1))
			}
			if s := r.Stats(); s.Exports != 1 || s.Spans != 1 || s.Emitted != 1 {
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
	sink := captureSpans(r)
	for _, name := range []string{"vllm_llm_request.json", "tgi_generate_stream.json"} {
		if got := post(t, r.Handler(), "application/json", "", read(name)); got.status != http.StatusOK {
			t.Fatalf("%s: status = %d (%s)", name, got.status, got.body)
		}
	}
	// Hex ids per the OTLP/JSON spec, in upper case in the fixture.
	vllm, ok := sink.find("", "5b8efff798038103d269b633813fc60c")
	if !ok {
		t.Fatal("vLLM span not found by its hex trace id")
	}
	checkTiming(t, &vllm.Timing, wantVLLMTiming())
	if _, ok := sink.find("chatcmpl-json-1", ""); !ok {
		t.Error("vLLM span not found by request id")
	}
	tgi, ok := sink.find("", "4bf92f3577b34da6a3ce929d0e0e4736")
	if !ok {
		t.Fatal("TGI span not found by trace id")
	}
	checkTiming(t, &tgi.Timing, &event.ServerTiming{Source: event.SourceOTLPTGI, Stages: map[event.Stage]time.Duration{
		event.StageTokenize:  850 * time.Microsecond,
		event.StageQueue:     12300 * time.Microsecond,
		event.StageInference: 1186850 * time.Microsecond,
		event.StageServerE2E: 1200 * time.Millisecond,
	}})
	if s := r.Stats(); s.Spans != 3 || s.Emitted != 2 {
		t.Errorf("stats = %+v, want 3 spans read, 2 emitted", s)
	}
}

func TestOTLPReceiverRejects(t *testing.T) {
	t.Parallel()
	r := NewOTLPReceiver(OTLPConfig{MaxBody: 4096})
	sink := captureSpans(r)
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
	if _, ok := sink.find("after", ""); !ok {
		t.Error("receiver stopped emitting after bad bodies")
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

func TestOTLPReceiverBoundsConcurrentExports(t *testing.T) {
	t.Parallel()
	r := NewOTLPReceiver(OTLPConfig{MaxConcurrent: 2})
	sink := captureSpans(r)
	good, _ := proto.Marshal(exportOf(vllmSpan("ok", traceIDOf(5))))
	// Two exports are being read (their slots are taken): a third is refused
	// at once, with a Retry-After, instead of holding more memory.
	r.slot <- struct{}{}
	r.slot <- struct{}{}
	req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(good))
	req.Header.Set("Content-Type", contentProtobuf)
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("third export: status %d, Retry-After %q; want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	<-r.slot
	if got := post(t, r.Handler(), contentProtobuf, "", good); got.status != http.StatusOK {
		t.Fatalf("with a free slot: status %d", got.status)
	}
	if _, ok := sink.find("ok", ""); !ok {
		t.Error("the accepted export's span was not emitted")
	}
	if s := r.Stats(); s.Rejected != 1 || s.Exports != 1 {
		t.Errorf("stats %+v: want 1 rejected, 1 export", s)
	}
}

func TestOTLPReceiverSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := NewOTLPReceiver(OTLPConfig{Listener: ln, ReadTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, func(event.Event) {}) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Promise 8 MB and send 10 bytes: the server must hang up, not wait.
	fmt.Fprintf(conn, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 8000000\r\n\r\n0123456789")
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the server kept a slow export open past its read timeout: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestOTLPReceiverWithSDKExporter sends a span through the real OpenTelemetry
// Go SDK and its OTLP/HTTP exporter (protobuf, gzip) over loopback.
func TestOTLPReceiverWithSDKExporter(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := NewOTLPReceiver(OTLPConfig{Listener: ln})
	ctx, cancel := context.WithCancel(context.Background())
	spans := make(chan *event.Span, 4)
	served := make(chan error, 1)
	go func() {
		served <- r.Run(ctx, func(ev event.Event) {
			if ev.Span != nil {
				spans <- ev.Span
			}
		})
	}()

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

	var got *event.Span
	select {
	case got = <-spans:
	case <-time.After(10 * time.Second):
		t.Fatalf("no span emitted; stats %+v", r.Stats())
	}
	if got.TraceID != "0af7651916cd43dd8448eb211c80319c" || got.RequestID != "cmpl-sdk-1" {
		t.Errorf("span ids %q / %q", got.TraceID, got.RequestID)
	}
	checkTiming(t, &got.Timing, &event.ServerTiming{Source: event.SourceOTLP, PromptTokens: 7, Stages: map[event.Stage]time.Duration{
		event.StageQueue: 4 * time.Millisecond, event.StagePrefill: 11 * time.Millisecond, event.StageServerTTFT: 17 * time.Millisecond,
	}})
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
	if err := NewOTLPReceiver(OTLPConfig{}).Run(context.Background(), func(event.Event) {}); err == nil {
		t.Error("Run without an address succeeded")
	}

	var markers []string
	emit := func(ev event.Event) {
		if ev.Marker == nil || ev.Marker.Kind != event.MarkerCollector && ev.Marker.Kind != event.MarkerNote {
			t.Errorf("emitted %+v, want only collector markers and notes", ev)
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
		r := NewOTLPReceiver(OTLPConfig{MaxBody: 1 << 16})
		captureSpans(r)
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
	})
}

func TestOTLPReceiverReportsRefusedExports(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := NewOTLPReceiver(OTLPConfig{Listener: ln})
	var mu sync.Mutex
	var markers []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(ev event.Event) {
			if ev.Marker != nil {
				mu.Lock()
				markers = append(markers, ev.Marker.Message)
				mu.Unlock()
			}
		})
	}()
	for range 3 {
		resp, err := http.Post("http://"+ln.Addr().String()+"/v1/traces", contentProtobuf, strings.NewReader("\xff\xff\xff"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := markers[len(markers)-1]
	if !strings.Contains(last, "refused 3 export(s)") || !strings.Contains(last, "decode otlp/protobuf") {
		t.Errorf("markers %q: want the refused exports reported with the reason when the run ends", markers)
	}
}

// TestOTLPReceiverEventsInTimeOrder: spans from concurrent exports, and the
// receiver's own markers, leave in the order of their times.
func TestOTLPReceiverEventsInTimeOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Unix(1767000000, 0)
	r := NewOTLPReceiver(OTLPConfig{MaxConcurrent: 8, Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}})
	var order sync.Mutex
	var times []time.Time
	record := func(ev event.Event) {
		order.Lock()
		defer order.Unlock()
		times = append(times, ev.Time())
	}
	r.setEmit(record)
	body, err := proto.Marshal(exportOf(vllmSpan("a", traceIDOf(1)), vllmSpan("b", traceIDOf(2)), vllmSpan("c", traceIDOf(3))))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if res := post(t, r.Handler(), contentProtobuf, "", body); res.status != http.StatusOK {
					t.Errorf("export answered %d", res.status)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 25 {
			r.emitMarker(record, event.MarkerCollector, fmt.Sprint("report ", i))
		}
	})
	wg.Wait()
	if len(times) != 4*25*3+25 {
		t.Fatalf("%d events, want %d", len(times), 4*25*3+25)
	}
	for i := 1; i < len(times); i++ {
		if times[i].Before(times[i-1]) {
			t.Fatalf("event %d at %v follows one at %v", i, times[i], times[i-1])
		}
	}
}
