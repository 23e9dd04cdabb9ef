package sim

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an in-process OTLP/HTTP traces endpoint.
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	got   chan struct{}
}

func (o *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	select {
	case o.got <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func TestOTLPSpans(t *testing.T) {
	t.Parallel()
	sink := &otlpSink{got: make(chan struct{}, 1)}
	collector := httptest.NewServer(sink)
	defer collector.Close()
	_, url := startServer(t, Config{Profile: tinyProfile(t), OTLPEndpoint: collector.URL + "/v1/traces"})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hello", 5, true), map[string]string{
		RequestIDHeader: "span-1",
		"traceparent":   "00-" + traceID + "-00f067aa0ba902b7-01",
	})
	if !res.done {
		t.Fatalf("request failed: %v", res.err)
	}
	var span *tracepb.Span
	deadline := time.After(10 * time.Second)
	for span == nil {
		select {
		case <-sink.got:
		case <-deadline:
			t.Fatal("no span exported within 10s")
		}
		sink.mu.Lock()
		for _, s := range sink.spans {
			if s.GetName() == "llm_request" {
				span = s
			}
		}
		sink.mu.Unlock()
	}
	if got := hex.EncodeToString(span.GetTraceId()); got != traceID {
		t.Errorf("trace id = %s, want %s", got, traceID)
	}
	if got := hex.EncodeToString(span.GetParentSpanId()); got != "00f067aa0ba902b7" {
		t.Errorf("parent span id = %s", got)
	}
	if span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("kind = %v", span.GetKind())
	}
	attrs := map[string]float64{}
	var reqID string
	for _, kv := range span.GetAttributes() {
		v := kv.GetValue()
		switch {
		case kv.GetKey() == "gen_ai.request.id":
			reqID = v.GetStringValue()
		case v.GetDoubleValue() != 0:
			attrs[kv.GetKey()] = v.GetDoubleValue()
		default:
			attrs[kv.GetKey()] = float64(v.GetIntValue())
		}
	}
	if reqID != "span-1" {
		t.Errorf("gen_ai.request.id = %q", reqID)
	}
	for _, k := range []string{"gen_ai.latency.time_to_first_token", "gen_ai.latency.e2e", "gen_ai.latency.time_in_model_prefill",
		"gen_ai.latency.time_in_model_decode", "gen_ai.latency.time_in_model_inference"} {
		if attrs[k] <= 0 {
			t.Errorf("%s = %v, want > 0", k, attrs[k])
		}
	}
	if _, ok := attrs["gen_ai.latency.time_in_queue"]; !ok {
		t.Error("missing gen_ai.latency.time_in_queue")
	}
	if attrs["gen_ai.usage.completion_tokens"] != 5 || attrs["gen_ai.request.max_tokens"] != 5 || attrs["gen_ai.usage.prompt_tokens"] != 7 {
		t.Errorf("token attributes = %v", attrs)
	}
	if attrs["gen_ai.latency.e2e"] < attrs["gen_ai.latency.time_to_first_token"] {
		t.Errorf("e2e %v < ttft %v", attrs["gen_ai.latency.e2e"], attrs["gen_ai.latency.time_to_first_token"])
	}
}

func TestOTLPEndpointValidated(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{OTLPEndpoint: "not a url"}); err == nil {
		t.Error("New accepted a bad OTLP endpoint")
	}
}
