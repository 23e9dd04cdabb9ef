package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// wait bounds every wait in these tests: a deadlock fails the test instead
// of hanging it. No test asserts on how long anything took.
const wait = 30 * time.Second

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// agentUnderTest is a Server serving on loopback.
type agentUnderTest struct {
	*Server
	addr string // host:port
	url  string // http://host:port
	stop func() // stops serving and waits for Serve; once, also at the test's end
}

// startAgent serves a Server on a free loopback port until the test ends.
func startAgent(t testing.TB, cfg Config) *agentUnderTest {
	t.Helper()
	cfg.Listen.Addr = "127.0.0.1:0"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(stop)
	scheme := "http"
	if cfg.Listen.TLSCert != "" {
		scheme = "https"
	}
	return &agentUnderTest{Server: s, addr: ln.Addr().String(), url: scheme + "://" + ln.Addr().String(), stop: stop}
}

// attached is a Client running until the test ends, with what it emitted.
type attached struct {
	*Client
	events chan event.Event
	done   chan error
	states chan Status
}

func attach(t testing.TB, cfg ClientConfig) *attached {
	t.Helper()
	a := &attached{events: make(chan event.Event, 1<<16), done: make(chan error, 1), states: make(chan Status, 1<<12)}
	cfg.OnState = func(s Status) {
		select {
		case a.states <- s:
		default: // a test that does not watch states does not hold up the client
		}
	}
	if cfg.Backoff.Initial == 0 {
		cfg.Backoff = Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.Client = c
	ctx, cancel := context.WithCancel(context.Background())
	go func() { a.done <- c.Run(ctx, func(ev event.Event) { a.events <- ev }) }()
	t.Cleanup(cancel)
	return a
}

// untilState waits for the client to report s, and returns that status.
func (a *attached) untilState(t testing.TB, s State) Status {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case st := <-a.states:
			if st.State == s {
				return st
			}
		case <-timeout:
			t.Fatalf("client never reached state %v (now %+v)", s, a.Status())
		}
	}
}

// finish waits for Run to return and gives everything the client emitted.
func (a *attached) finish(t testing.TB) ([]event.Event, error) {
	t.Helper()
	var err error
	select {
	case err = <-a.done:
	case <-time.After(wait):
		t.Fatalf("client still running: %+v", a.Status())
	}
	close(a.events)
	var got []event.Event
	for ev := range a.events {
		got = append(got, ev)
	}
	return got, err
}

// sessionEvent is a realistic session header.
func sessionEvent(name string) event.Event {
	return event.NewSession(&event.Session{
		Time: t0, Latscope: "test", RunID: "run-1", Name: name, Host: "gpu-box-1",
		Target: "http://10.0.0.5:8000", Server: "vllm", Dialect: "openai-chat", Model: "llama-3-8b",
		Load: event.Load{Mode: "open", Rate: 200, Arrival: "poisson", OutputTokens: "128"},
	})
}

// requestEvent is a realistic record of one successful 128-token stream.
func requestEvent(seq int) event.Event {
	start := t0.Add(time.Duration(seq) * 5 * time.Millisecond)
	ttft := 180*time.Millisecond + time.Duration(seq%17)*time.Millisecond
	chunks := make([]event.Chunk, 128)
	for i := range chunks {
		chunks[i] = event.Chunk{At: ttft + time.Duration(i)*21*time.Millisecond + time.Duration(i%7)*100*time.Microsecond, Tokens: 1, Batch: 1}
	}
	e2e := chunks[len(chunks)-1].At + 2*time.Millisecond
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	return event.NewRequest(&event.Request{
		ID: fmt.Sprintf("req-%08d", seq), TraceID: fmt.Sprintf("%032x", seq), Seq: uint64(seq), Worker: seq % 64,
		Target: "http://10.0.0.5:8000", Dialect: "openai-chat", Model: "llama-3-8b",
		PromptTokens: 512, TargetOutputTokens: 128, OutputTokens: 128,
		Intended: start, Start: start.Add(30 * time.Microsecond), SchedLag: 30 * time.Microsecond,
		Stages: []event.StageTiming{
			{Stage: event.StageSchedLag, Duration: 30 * time.Microsecond, Provenance: event.Measured},
			{Stage: event.StageSerialize, Duration: 45 * time.Microsecond, Provenance: event.Measured},
			{Stage: event.StageConnWait, Duration: 8 * time.Microsecond, Provenance: event.Measured},
			{Stage: event.StageWrite, Duration: 60 * time.Microsecond, Provenance: event.Measured},
			{Stage: event.StageWaitHeaders, Duration: ms(150), Provenance: event.Measured},
			{Stage: event.StageFirstToken, Duration: ttft - ms(150.143), Provenance: event.Measured},
		},
		Breakdown: []event.StageTiming{
			{Stage: event.StageNetworkOut, Duration: 40 * time.Microsecond, Provenance: event.Estimated, Source: "connect_rtt"},
			{Stage: event.StageQueue, Duration: ms(90), Provenance: event.ServerReported, Source: "vllm.metrics"},
			{Stage: event.StagePrefill, Duration: ms(70), Provenance: event.ServerReported, Source: "vllm.metrics"},
			{Stage: event.StageNetworkReturn, Duration: 40 * time.Microsecond, Provenance: event.Estimated, Source: "connect_rtt"},
			{Stage: event.StageUnattributed, Duration: ttft - ms(160.08), Provenance: event.Estimated},
		},
		ConnectRTT: 80 * time.Microsecond, ReusedConn: true,
		FirstEvent: ttft - time.Millisecond, TTFT: ttft, E2E: e2e, Chunks: chunks,
		Outcome: event.OutcomeOK, Status: 200,
		Server: &event.ServerTiming{Source: "vllm.metrics", Stages: map[event.Stage]time.Duration{
			event.StageQueue: ms(90), event.StagePrefill: ms(70), event.StageServerE2E: e2e - ms(1)}},
	})
}

// publishAll publishes evs and returns them.
func publishAll(t testing.TB, s *Server, evs ...event.Event) []event.Event {
	t.Helper()
	for _, ev := range evs {
		if err := s.Publish(ev); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

func requests(from, n int) []event.Event {
	out := make([]event.Event, n)
	for i := range out {
		out[i] = requestEvent(from + i)
	}
	return out
}

// sameEvents fails unless got and want encode identically, in order.
func sameEvents(t testing.TB, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, err1 := event.Marshal(got[i])
		w, err2 := event.Marshal(want[i])
		if err1 != nil || err2 != nil || string(g) != string(w) {
			t.Fatalf("event %d differs:\ngot  %.200s\nwant %.200s", i, g, w)
		}
	}
}

// stuckClient opens /events over raw TCP, reads the response headers, and
// then never reads again.
func stuckClient(t testing.TB, addr, token string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET /events HTTP/1.1\r\nHost: agent\r\nAccept: text/event-stream\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	// Read exactly the headers, one byte at a time, so nothing of the body
	// is taken off the socket.
	var head strings.Builder
	br := bufio.NewReaderSize(oneByte{conn}, 16)
	for !strings.HasSuffix(head.String(), "\r\n\r\n") {
		b, err := br.ReadByte()
		if err != nil {
			t.Fatalf("stuck client: read headers: %v", err)
		}
		head.WriteByte(b)
	}
	if !strings.HasPrefix(head.String(), "HTTP/1.1 200") {
		t.Fatalf("stuck client: %q", head.String())
	}
	return conn
}

// oneByte reads at most one byte per call.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// get fetches path from the agent with token (if any).
func get(t testing.TB, a *agentUnderTest, path, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
