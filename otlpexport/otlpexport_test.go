package otlpexport

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latscope/latscope/event"
)

// collectorServer is a loopback OTLP/HTTP endpoint that keeps every span.
type collectorServer struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	headers []http.Header
	got     chan struct{}
}

func newCollector(t *testing.T) *collectorServer {
	c := &collectorServer{got: make(chan struct{}, 16)}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("gzip: %v", err)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("decode export: %v", err)
			http.Error(w, err.Error(), 400)
			return
		}
		c.mu.Lock()
		c.headers = append(c.headers, r.Header.Clone())
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		c.got <- struct{}{}
	}))
	t.Cleanup(c.Close)
	return c
}

func request() *event.Request {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	return &event.Request{
		ID: "ls-ab-7", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		Dialect: "openai-chat", Model: "m", PromptTokens: 512, OutputTokens: 4,
		Intended: t0, Start: t0, TTFT: 100 * ms, E2E: 130 * ms, Outcome: event.OutcomeOK, Status: 200,
		Stages: []event.StageTiming{
			{Stage: event.StageSerialize, Duration: ms, Provenance: event.Measured},
			{Stage: event.StageWrite, Duration: ms, Provenance: event.Measured},
			{Stage: event.StageWaitHeaders, Duration: 3 * ms, Provenance: event.Measured},
			{Stage: event.StageFirstToken, Duration: 95 * ms, Provenance: event.Measured},
		},
		Breakdown: []event.StageTiming{
			{Stage: event.StageSerialize, Duration: ms, Provenance: event.Measured},
			{Stage: event.StageWrite, Duration: ms, Provenance: event.Measured},
			{Stage: event.StageQueue, Duration: 60 * ms, Provenance: event.ServerReported, Source: "otlp"},
			{Stage: event.StagePrefill, Duration: 30 * ms, Provenance: event.ServerReported, Source: "otlp"},
			{Stage: event.StageUnattributed, Duration: 8 * ms, Provenance: event.Estimated, Source: "residual"},
		},
		Chunks: []event.Chunk{{At: 100 * ms, Tokens: 1}, {At: 110 * ms, Tokens: 1}, {At: 120 * ms, Tokens: 1}, {At: 130 * ms, Tokens: 1}},
	}
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v := kv.Value.GetStringValue(); v != "" {
				return v
			}
			return kv.Value.String()
		}
	}
	return ""
}

func TestExportsOneTraceWithTheProbesIDs(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	exp, err := New(context.Background(), Config{Endpoint: col.URL + "/v1/traces", Headers: map[string]string{"Authorization": "Bearer collector-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.Event, 4)
	events <- event.NewSession(&event.Session{Name: "us-east", Target: "http://x"})
	events <- event.NewRequest(request())
	close(events)
	if err := exp.Run(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) == 0 {
		t.Fatal("no spans exported")
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range col.spans {
		if hex.EncodeToString(s.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("span %s in trace %x, want the probe's trace id", s.Name, s.TraceId)
		}
		byName[s.Name] = s
	}
	root := byName["llm.request"]
	if root == nil || hex.EncodeToString(root.SpanId) != "00f067aa0ba902b7" || len(root.ParentSpanId) != 0 {
		t.Fatalf("root span %+v: want the probe's span id (the server spans' parent) and no parent", root)
	}
	if attr(root, "latscope.session") != "us-east" || attr(root, "latscope.outcome") != "ok" {
		t.Errorf("root attributes: %v", root.Attributes)
	}
	queue := byName["stage queue"]
	if queue == nil || !bytes.Equal(queue.ParentSpanId, root.SpanId) || attr(queue, "latscope.provenance") != "server" {
		t.Fatalf("queue span %+v: want a server-reported child of the request", queue)
	}
	// Server stages start when the request was written: 2 ms in.
	if got := time.Duration(queue.StartTimeUnixNano - root.StartTimeUnixNano); got != 2*time.Millisecond {
		t.Errorf("queue starts %v after the request, want 2ms", got)
	}
	if got := time.Duration(queue.EndTimeUnixNano - queue.StartTimeUnixNano); got != 60*time.Millisecond {
		t.Errorf("queue lasts %v, want 60ms", got)
	}
	if byName["stage unattributed"] == nil || attr(byName["stage unattributed"], "latscope.provenance") != "estimated" {
		t.Error("unattributed is not exported as an estimate")
	}
	if d := byName["stage decode"]; d == nil || time.Duration(d.EndTimeUnixNano-d.StartTimeUnixNano) != 30*time.Millisecond {
		t.Errorf("decode span %+v, want 30ms", d)
	}
	for _, s := range col.spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "collector-secret") {
				t.Fatalf("span %s carries the collector's credential", s.Name)
			}
		}
	}
	if col.headers[0].Get("Authorization") != "Bearer collector-secret" {
		t.Error("the configured header was not sent to the collector")
	}
	if st := exp.Stats(); st.Requests != 1 || st.Spans != uint64(len(col.spans)) || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestUnreachableCollectorCountsFailures(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest) // not retryable: fails at once
	}))
	defer srv.Close()
	exp, err := New(context.Background(), Config{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	events := oneRequest()
	if err := exp.Run(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	if st := exp.Stats(); st.Failed == 0 || st.LastErr == "" {
		t.Errorf("stats %+v: want the failed export counted with its error", st)
	}
}

func TestBadEndpoint(t *testing.T) {
	t.Parallel()
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Error("no endpoint accepted")
	}
	_, err := New(context.Background(), Config{Endpoint: "http://user:pw@%zz"})
	if err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("bad endpoint: %v (must fail without echoing the password)", err)
	}
}

// TestHangingCollectorBoundsTheEnd: a collector that never answers costs
// at most FlushTimeout at the end, says so first, and the spans it never
// took are counted as dropped.
func TestHangingCollectorBoundsTheEnd(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	var waited time.Duration
	var waitedFor int
	exp, err := New(context.Background(), Config{
		Endpoint: srv.URL, FlushTimeout: 200 * time.Millisecond, ExportTimeout: time.Hour,
		OnFlush: func(d time.Duration, spans int) { waited, waitedFor = d, spans },
	})
	if err != nil {
		t.Fatal(err)
	}
	events := oneRequest()
	// The collector never answers and an export may take an hour: Run
	// returning, with the wait's spans dropped, shows the deadline ended it.
	if err := exp.Run(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	st := exp.Stats()
	if waited != 200*time.Millisecond || waitedFor == 0 || st.Dropped != uint64(waitedFor) || st.Spans != 0 {
		t.Errorf("OnFlush(%s, %d), stats %+v: want the wait said and its spans dropped", waited, waitedFor, st)
	}
}

// TestFailuresAreSaidAsTheyHappen: each failed export reaches OnFailure
// with the spans it lost.
func TestFailuresAreSaidAsTheyHappen(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	var lost int
	var mu sync.Mutex
	exp, err := New(context.Background(), Config{Endpoint: srv.URL, OnFailure: func(err error, spans int) {
		mu.Lock()
		defer mu.Unlock()
		lost += spans
	}})
	if err != nil {
		t.Fatal(err)
	}
	events := oneRequest()
	if err := exp.Run(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if st := exp.Stats(); lost == 0 || uint64(lost) != st.Failed {
		t.Errorf("OnFailure heard of %d spans lost, stats %+v", lost, st)
	}
}

// oneRequest is a closed stream of one request record, for Run.
func oneRequest() <-chan event.Event {
	events := make(chan event.Event, 1)
	events <- event.NewRequest(request())
	close(events)
	return events
}
