package event

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleEvents() []Event {
	start := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	q := 3.0
	kv := 0.42
	runQueue := 9
	return []Event{
		NewRequest(&Request{
			ID: "ls-1-0", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Seq: 7, Dialect: "openai-chat", Model: "m",
			PromptTokens: 512, TargetOutputTokens: 4, OutputTokens: 4,
			Intended: start, Start: start.Add(time.Millisecond), SchedLag: time.Millisecond,
			Stages: []StageTiming{
				{Stage: StageSchedLag, Duration: time.Millisecond, Provenance: Measured},
				{Stage: StageWrite, Duration: 30 * time.Microsecond, Provenance: Measured},
			},
			Breakdown: []StageTiming{
				{Stage: StageQueue, Duration: 5 * time.Millisecond, Provenance: ServerReported, Source: "otlp"},
				{Stage: StageNetworkOut, Duration: 20 * time.Microsecond, Provenance: Estimated, Source: "connect_rtt"},
				{Stage: StageUnattributed, Duration: -3 * time.Microsecond, Provenance: Estimated},
			},
			ConnectRTT: 40 * time.Microsecond,
			FirstEvent: 20 * time.Millisecond, TTFT: 25 * time.Millisecond, E2E: 60 * time.Millisecond,
			Chunks:  []Chunk{{At: 24 * time.Millisecond, Tokens: 1, Batch: 1}, {At: 36 * time.Millisecond, Tokens: 3, Batch: 2}},
			Outcome: OutcomeOK, Flags: []Flag{FlagRoleOnlyFirst},
			Server: &ServerTiming{Source: "llamacpp.timings", Stages: map[Stage]time.Duration{StagePrefill: 11 * time.Millisecond}},
		}),
		NewRequest(&Request{ID: "ls-1-1", Dialect: "tgi", Start: start, Intended: start, Outcome: OutcomeHTTPStatus, Status: 429, Error: "rate limited"}),
		NewServer(&ServerSample{
			Time: start, Source: "http://127.0.0.1:8000/metrics", Dialect: "vllm", Interval: time.Second,
			Waiting: &q, KVCache: &kv,
			Stages: map[string]HistStat{"queue": {Count: 4, Mean: 2 * time.Millisecond, P99: 9 * time.Millisecond}},
			Gauges: map[string]float64{"vllm:num_requests_waiting": 3},
		}),
		NewGPU(&GPUSample{Time: start, Available: false, Reason: "NVML unavailable: library not found"}),
		NewGPU(&GPUSample{Time: start, Available: true, Simulated: true, Devices: []GPUDevice{{Name: "Simulated GPU", UtilGPU: 80, MemTotal: 80 << 30, ThrottleReason: []string{"sw_power_cap"}, Processes: []GPUProcess{{PID: 42, MemUsed: 1 << 30}}}}}),
		NewSession(&Session{Time: start, Latscope: "dev", RunID: "ab12", Name: "us-east", Host: "probe-1", Target: "http://127.0.0.1:8000",
			Server: "vllm", Dialect: "openai-chat", Model: "m", Load: Load{Mode: "closed", Concurrency: 16, PromptTokens: "512", OutputTokens: "128", Duration: time.Minute}}),
		NewProbe(&ProbeSample{Time: start, InFlight: 12, MaxInFlight: 16, CPUPercent: 21.5, SchedLagP99: 300 * time.Microsecond, LagSamples: 40, Reconnects: 2}),
		NewProbe(&ProbeSample{Time: start, InFlight: 2, MaxInFlight: 16, CPUPercent: 21.5, Raw: ProbeRawV1, Cores: 4,
			SendLags: []SendLag{{At: -300 * time.Millisecond, Lag: 40 * time.Microsecond}},
			Late:     []Stretch{{From: start.Add(-time.Second).UTC(), To: start.Add(-900 * time.Millisecond).UTC()}},
			Sent:     []Sent{{ID: "ls-1-7", At: start.Add(-20 * time.Millisecond).UTC()}}}),
		NewSpan(&Span{Time: start, RequestID: "ls-1-0", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			Timing: ServerTiming{Source: "otlp", Stages: map[Stage]time.Duration{StageQueue: 5 * time.Millisecond}}}),
		NewLoss(&Loss{Time: start, Consumer: "dashboard", Events: 17, Reason: "behind"}),
		NewHost(&HostSample{Time: start, Interval: time.Second, Available: true, PSISome: &kv, PSISomeAvg10: &kv, Steal: &kv, SelfCPU: &kv, RunQueue: &runQueue, Cores: 2}),
		NewHost(&HostSample{Time: start, Available: false, Reason: "host pressure unavailable: no /proc"}),
		NewMarker(&Marker{Time: start, Kind: MarkerStall, Source: "stall-detector", Message: "3 streams paused together", Duration: 31 * time.Millisecond, Values: map[string]float64{"streams": 3}, RequestIDs: []string{"a", "b", "c"}}),
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, want := range sampleEvents() {
		b, err := Marshal(want)
		if err != nil {
			t.Fatalf("marshal %s: %v", want.Kind, err)
		}
		got, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("unmarshal %s: %v\n%s", want.Kind, err, b)
		}
		// JSON drops the monotonic clock reading; compare wall times.
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Errorf("round trip of %s changed the event:\n got %+v\nwant %+v", want.Kind, got, want)
		}
	}
}

func normalize(e Event) Event {
	if e.Request != nil {
		r := *e.Request
		r.Start, r.Intended = r.Start.UTC().Round(0), r.Intended.UTC().Round(0)
		e.Request = &r
	}
	return e
}

func TestEncoderDecoderStream(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	events := sampleEvents()
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(&buf)
	n := 0
	for {
		_, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode event %d: %v", n, err)
		}
		n++
	}
	if n != len(events) {
		t.Fatalf("decoded %d events, want %d", n, len(events))
	}
}

func TestDecoderTruncatedLastLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for _, e := range sampleEvents()[:2] {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	_ = enc.Flush()
	full := buf.String()
	cut := full[:len(full)-20] // cut the second record mid-way
	dec := NewDecoder(strings.NewReader(cut))
	if _, err := dec.Decode(); err != nil {
		t.Fatalf("first complete record: %v", err)
	}
	_, err := dec.Decode()
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("got %v, want ErrTruncated", err)
	}
	if !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error %q does not name the line", err)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"not json":         `{"v":1,`,
		"future version":   `{"v":99,"kind":"marker","marker":{"kind":"note","message":"x","time":"2026-01-01T00:00:00Z"}}`,
		"missing version":  `{"kind":"marker","marker":{"kind":"note","message":"x","time":"2026-01-01T00:00:00Z"}}`,
		"unknown kind":     `{"v":1,"kind":"weird","marker":{"kind":"note","message":"x","time":"2026-01-01T00:00:00Z"}}`,
		"payload mismatch": `{"v":1,"kind":"gpu","marker":{"kind":"note","message":"x","time":"2026-01-01T00:00:00Z"}}`,
		"two payloads":     `{"v":1,"kind":"gpu","gpu":{"time":"2026-01-01T00:00:00Z","available":false},"marker":{"kind":"note","message":"x","time":"2026-01-01T00:00:00Z"}}`,
		"no payload":       `{"v":1,"kind":"request"}`,
		"wrong type":       `{"v":1,"kind":"request","request":{"id":5}}`,
	}
	for name, in := range cases {
		if _, err := Unmarshal([]byte(in)); err == nil {
			t.Errorf("%s: accepted %s", name, in)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://user:secret@host:8000/v1":    "http://REDACTED@host:8000/v1",
		"http://host:8000":                   "http://host:8000",
		"https://host/metrics?token=abc&x=1": "https://host/metrics?token=REDACTED&x=REDACTED",
		"::not a url with secret@host":       "REDACTED@host",
	} {
		got := RedactURL(in)
		if got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "abc") {
			t.Errorf("RedactURL(%q) = %q still holds the secret", in, got)
		}
	}
}

func TestRequestDerivedMetrics(t *testing.T) {
	t.Parallel()
	r := &Request{TTFT: 100 * time.Millisecond, E2E: 400 * time.Millisecond, OutputTokens: 4,
		Chunks: []Chunk{{At: 100 * time.Millisecond, Tokens: 1}, {At: 200 * time.Millisecond, Tokens: 2}, {At: 400 * time.Millisecond, Tokens: 1}}}
	if got, want := r.TPOT(), 100*time.Millisecond; got != want {
		t.Errorf("TPOT = %v, want %v", got, want)
	}
	itl := r.ITLs()
	if len(itl) != 2 || itl[0] != 100*time.Millisecond || itl[1] != 200*time.Millisecond {
		t.Errorf("ITLs = %v, want one gap per chunk pair", itl)
	}
	if got := r.TokensPerSecond(); got != 10 {
		t.Errorf("TokensPerSecond = %v, want 10", got)
	}
	if (&Request{OutputTokens: 1, TTFT: 1, E2E: 2}).TPOT() != 0 {
		t.Error("TPOT of a 1-token output must be 0 (undefined)")
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, e := range sampleEvents() {
		b, _ := Marshal(e)
		f.Add(b)
	}
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Unmarshal(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode again and decode to the same kind.
		b, err := Marshal(e)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		e2, err := Unmarshal(b)
		if err != nil || e2.Kind != e.Kind {
			t.Fatalf("re-decode: %v (kind %q vs %q)", err, e2.Kind, e.Kind)
		}
	})
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("{\"v\":1,\"kind\":\"marker\",\"marker\":{\"kind\":\"note\",\"message\":\"x\",\"time\":\"2026-01-01T00:00:00Z\"}}\n{\"v\":1,"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewDecoder(bytes.NewReader(data))
		for i := 0; i < 10000; i++ {
			if _, err := dec.Decode(); err != nil {
				return
			}
		}
		t.Fatal("decoder did not stop")
	})
}

func TestSizeCountsARequestsChunks(t *testing.T) {
	t.Parallel()
	small := NewRequest(&Request{ID: "r"})
	big := NewRequest(&Request{ID: "r", Chunks: make([]Chunk, 1<<16)})
	if d := big.Size() - small.Size(); d != 1<<20 {
		t.Fatalf("65,536 chunks add %d bytes, want 1 MiB (16 each)", d)
	}
	if s := NewMarker(&Marker{}).Size(); s <= 0 || s > 4096 {
		t.Fatalf("a marker's size = %d, want a few hundred bytes", s)
	}
}
