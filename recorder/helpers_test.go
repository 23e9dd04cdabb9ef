package recorder

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func testHeader() *event.Session {
	return &event.Session{Time: t0, Latscope: "dev", RunID: "ab12", Host: "probe-1", Target: "http://127.0.0.1:8000",
		Server: "vllm", Dialect: "openai-chat", Model: "m", Load: event.Load{Mode: "closed", Concurrency: 16, OutputTokens: "128", Duration: time.Minute}}
}

// everyKind returns one event of each kind but the session (the header is
// the recording's one session; two requests: a success and a failure),
// stamped from start on. The requests' ids differ with start: a reader
// drops a request read before.
func everyKind(start time.Time) []event.Event {
	q, kv := 3.0, 0.42
	seq := 7 + 2*uint64(start.Sub(t0)/time.Millisecond)
	return []event.Event{
		event.NewRequest(realisticRequest(rand.New(rand.NewPCG(1, 2)), start, seq)),
		event.NewRequest(&event.Request{ID: fmt.Sprintf("ls-ab12-%d", seq+1), Dialect: "tgi", Start: start, Intended: start, Outcome: event.OutcomeHTTPStatus, Status: 429, Error: "rate limited"}),
		event.NewServer(&event.ServerSample{
			Time: start, Source: "http://127.0.0.1:8000/metrics", Dialect: "vllm", Interval: time.Second, Waiting: &q, KVCache: &kv,
			Stages: map[string]event.HistStat{"queue": {Count: 4, Mean: 2 * time.Millisecond, P99: 9 * time.Millisecond}},
			Gauges: map[string]float64{"vllm:num_requests_waiting": 3},
		}),
		event.NewGPU(&event.GPUSample{Time: start, Available: true, Simulated: true, Devices: []event.GPUDevice{{Name: "Simulated GPU", UtilGPU: 80, MemTotal: 80 << 30, ThrottleReason: []string{"sw_power_cap"}, Processes: []event.GPUProcess{{PID: 42, MemUsed: 1 << 30}}}}}),
		event.NewMarker(&event.Marker{Time: start, Kind: event.MarkerStall, Source: "stall-detector", Message: "3 streams paused together", Duration: 31 * time.Millisecond, Values: map[string]float64{"streams": 3}, RequestIDs: []string{"a", "b", "c"}}),
		event.NewProbe(&event.ProbeSample{Time: start, InFlight: 12, MaxInFlight: 16, CPUPercent: 21.5, SchedLagP99: 300 * time.Microsecond, LagSamples: 40, Reconnects: 2}),
		event.NewSpan(&event.Span{Time: start, RequestID: fmt.Sprintf("ls-ab12-%d", seq), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Timing: event.ServerTiming{Source: "otlp", Stages: map[event.Stage]time.Duration{event.StageQueue: 5 * time.Millisecond}}}),
		event.NewLoss(&event.Loss{Time: start, Consumer: "dashboard", Events: 17, Reason: "consumer fell behind"}),
	}
}

// realisticRequest is a 128-token streamed request as the probe records it:
// client stages, an attributed breakdown, server timing and one chunk per
// token at jittered, nanosecond-resolution offsets.
func realisticRequest(rng *rand.Rand, start time.Time, seq uint64) *event.Request {
	jitter := func(d time.Duration, frac float64) time.Duration {
		return d + time.Duration((rng.Float64()*2-1)*frac*float64(d))
	}
	const tokens = 128
	ttft := jitter(85*time.Millisecond, 0.3)
	chunks := make([]event.Chunk, tokens)
	at := ttft
	for i := range chunks {
		if i > 0 {
			at += jitter(22*time.Millisecond, 0.25)
		}
		chunks[i] = event.Chunk{At: at, Tokens: 1, Batch: 1}
	}
	e2e := at + jitter(400*time.Microsecond, 0.5)
	queue, prefill := jitter(9*time.Millisecond, 0.5), jitter(52*time.Millisecond, 0.2)
	measured := func(s event.Stage, d time.Duration) event.StageTiming {
		return event.StageTiming{Stage: s, Duration: d, Provenance: event.Measured}
	}
	server := func(s event.Stage, d time.Duration) event.StageTiming {
		return event.StageTiming{Stage: s, Duration: d, Provenance: event.ServerReported, Source: "otlp"}
	}
	estimated := func(s event.Stage, d time.Duration) event.StageTiming {
		return event.StageTiming{Stage: s, Duration: d, Provenance: event.Estimated, Source: "connect_rtt"}
	}
	return &event.Request{
		ID: fmt.Sprintf("ls-ab12-%d", seq), TraceID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()), Seq: seq, Worker: int(seq % 16),
		Target: "http://127.0.0.1:8000", Dialect: "openai-chat", Model: "meta-llama/Llama-3.1-8B-Instruct",
		PromptTokens: 512, TargetOutputTokens: tokens, OutputTokens: tokens,
		Intended: start, Start: start,
		Stages: []event.StageTiming{
			measured(event.StageSerialize, jitter(35*time.Microsecond, 0.3)),
			measured(event.StageConnWait, jitter(3*time.Microsecond, 0.3)),
			measured(event.StageWrite, jitter(28*time.Microsecond, 0.3)),
			measured(event.StageWaitHeaders, jitter(2*time.Millisecond, 0.3)),
			measured(event.StageFirstToken, ttft-2*time.Millisecond),
		},
		Breakdown: []event.StageTiming{
			estimated(event.StageNetworkOut, jitter(60*time.Microsecond, 0.2)),
			server(event.StageQueue, queue),
			server(event.StagePrefill, prefill),
			server(event.StageFirstDecode, jitter(21*time.Millisecond, 0.1)),
			estimated(event.StageNetworkReturn, jitter(60*time.Microsecond, 0.2)),
			{Stage: event.StageUnattributed, Duration: jitter(900*time.Microsecond, 0.5), Provenance: event.Estimated},
		},
		ConnectRTT: jitter(120*time.Microsecond, 0.2), ReusedConn: seq%4 != 0,
		FirstEvent: ttft - jitter(300*time.Microsecond, 0.3), TTFT: ttft, E2E: e2e, Chunks: chunks,
		Outcome: event.OutcomeOK,
		Server: &event.ServerTiming{Source: "otlp", PromptTokens: 512, OutputTokens: tokens, Stages: map[event.Stage]time.Duration{
			event.StageQueue: queue, event.StagePrefill: prefill, event.StageDecode: e2e - ttft, event.StageServerE2E: e2e - time.Millisecond,
		}},
	}
}

// recording is a file built in memory, with where each frame begins.
type recording struct {
	data   []byte
	frames []int64         // the offset of each data frame, the header's first
	events [][]event.Event // the events of each data frame
}

func (rec *recording) all() []event.Event {
	var all []event.Event
	for _, evs := range rec.events {
		all = append(all, evs...)
	}
	return all
}

// buildRecording writes the header, then each group of events as one frame.
func buildRecording(t testing.TB, groups ...[]event.Event) *recording {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	skippable := int64(len(appendHeaderFrame(nil, fileHeader{Magic: fileMagic, Format: FormatVersion, Schema: event.SchemaVersion})))
	rec := &recording{frames: []int64{skippable}, events: [][]event.Event{{event.NewSession(testHeader())}}}
	for _, g := range groups {
		rec.frames = append(rec.frames, int64(buf.Len()))
		for _, ev := range g {
			if err := w.Write(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		rec.events = append(rec.events, g)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec.data = buf.Bytes()
	return rec
}

// readAll reads every event of data and the error that ended the reading
// (nil at a clean end).
func readAll(data []byte) ([]event.Event, error) {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var got []event.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, ev)
	}
}

// sameEvents compares events by their encoding: JSON keeps neither the
// monotonic clock reading nor the *time.Location, which are not data.
func sameEvents(t testing.TB, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, err1 := event.Marshal(got[i])
		w, err2 := event.Marshal(want[i])
		if err1 != nil || err2 != nil || !bytes.Equal(g, w) {
			t.Fatalf("event %d differs:\n got %s\nwant %s", i, g, w)
		}
	}
}

// isPrefix reports whether got is the first len(got) events of want.
func isPrefix(got, want []event.Event) bool {
	if len(got) > len(want) {
		return false
	}
	for i := range got {
		g, _ := event.Marshal(got[i])
		w, _ := event.Marshal(want[i])
		if !bytes.Equal(g, w) {
			return false
		}
	}
	return true
}

// manualClock moves only when the test advances it. armed receives every
// time After is called, so a test can wait until a goroutine waits.
type manualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	armed   chan time.Duration
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: t0, armed: make(chan time.Duration, 64)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	c.mu.Unlock()
	c.armed <- d
	return ch
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// jumpClock is a clock that jumps ahead by whatever a caller waits for, so a
// paced replay runs at once while its clock reads as if it had waited.
type jumpClock struct {
	mu    sync.Mutex
	now   time.Time
	waits int
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *jumpClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waits++
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *jumpClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *jumpClock) Waits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waits
}
