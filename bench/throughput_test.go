package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestRunThroughputInProcess(t *testing.T) {
	t.Parallel()
	cfg := ThroughputConfig{
		Concurrency: []int{1, 4}, TokensPerWrite: []int{1, 16}, OutputTokens: 100,
		Tokens: 800, Rounds: 2, Clients: twoBareClients(), StartServer: InProcessServer(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := RunThroughput(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != 4 {
		t.Fatalf("cases = %d, want 4", len(res.Cases))
	}
	for _, c := range res.Cases {
		if c.Ratio == nil || len(c.Checks) != 3 {
			t.Fatalf("conc %d/%d: ratio %v checks %d", c.Concurrency, c.TokensPerWrite, c.Ratio, len(c.Checks))
		}
		for _, cl := range c.Clients {
			// Token mode: requests are claimed up to the budget and all finish.
			if cl.Events != 2*800 || cl.Requests != 2*8 || cl.Failed != 0 {
				t.Errorf("conc %d/%d %s: events %d requests %d failed %d, want 1600, 16, 0 (%s)",
					c.Concurrency, c.TokensPerWrite, cl.Client, cl.Events, cl.Requests, cl.Failed, cl.FirstError)
			}
			if cl.EventsPerSec <= 0 || cl.WallSeconds <= 0 || cl.AllocBytesPerToken <= 0 || cl.MallocsPerToken <= 0 {
				t.Errorf("conc %d/%d %s: not all measures positive: %+v", c.Concurrency, c.TokensPerWrite, cl.Client, cl)
			}
		}
	}
	var table bytes.Buffer
	if err := WriteThroughputTable(&table, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"events/s", "CPU µs/tok", "alloc B/tok", "probe/bare", "≥ 0.9x", "≤ 1.25x", "≤ 64 B"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	var back ThroughputResult
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("json does not read back: %v", err)
	}
}

// Duration mode on a virtual clock (testing/synctest): the fast server,
// paced at one token every 3 ms, and the bare client talk over in-memory
// connections, so the phase lasts exactly its 100 ms however busy the host
// is. Each of the 3 streams of 50 tokens is cut at the deadline after the
// 32 tokens flushed within it (the role event goes at 3 ms, the tokens at
// 6, 9, ... 99 ms), and a stream cut there is not a failure.
func TestRunThroughputDurationMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const gap = 3 * time.Millisecond
		ln := newMemListener()
		cfg := ThroughputConfig{
			Concurrency: []int{3}, TokensPerWrite: []int{1}, OutputTokens: 50,
			Duration: 100 * time.Millisecond, Rounds: 1, Warmup: 20 * time.Millisecond,
			Clients: []ClientFactory{{Name: "bare", New: func(baseURL string) (Streamer, error) {
				tr := NewTransport()
				tr.DialContext = ln.DialContext
				return NewBareClient(baseURL, "m", &http.Client{Transport: tr}), nil
			}}},
			StartServer: pacedServer(ln, gap),
		}
		res, err := RunThroughput(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl := res.Cases[0].Clients[0]
		// Streams cut at the deadline are not failures.
		if cl.Failed != 0 || cl.FirstError != "" {
			t.Errorf("%d failed (%s), want none: streams cut at the deadline are not failures", cl.Failed, cl.FirstError)
		}
		if cl.Requests != 3 || cl.Events != 3*32 {
			t.Errorf("%d requests, %d events; want 3 streams cut after 32 tokens each (an event every %v for 100 ms)", cl.Requests, cl.Events, gap)
		}
		if cl.WallSeconds != 0.1 {
			t.Errorf("the phase lasted %v s, want its duration, 0.1 s", cl.WallSeconds)
		}
		if res.Cases[0].Ratio != nil {
			t.Error("ratio without a probe")
		}
	})
}

// pacedServer serves FastServer on ln, sleeping gap before each flush: a
// server whose pace is set by the (virtual) clock.
func pacedServer(ln *memListener, gap time.Duration) ServerStarter {
	return func(_ context.Context, tokensPerWrite int) (string, func() error, error) {
		fast := FastServer{TokensPerWrite: tokensPerWrite}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fast.ServeHTTP(pacedWriter{w, r.Context(), gap}, r)
		})}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		return "http://bench.test", func() error {
			err := srv.Close()
			<-done
			return err
		}, nil
	}
}

type pacedWriter struct {
	http.ResponseWriter
	ctx context.Context // the request's: a client gone ends the pacing
	gap time.Duration
}

func (w pacedWriter) Flush() {
	t := time.NewTimer(w.gap)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.ctx.Done():
	}
	w.ResponseWriter.(http.Flusher).Flush()
}

// memListener is an in-memory net.Listener: DialContext hands Accept the
// other end of a net.Pipe. In a synctest bubble its waits are durably
// blocking, where a loopback socket's are not.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

func (l *memListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

func TestThroughputChecksMarkMisses(t *testing.T) {
	t.Parallel()
	ratio, checks := throughputChecks([]ClientThroughput{
		{Client: "probe", Events: 10, EventsPerSec: 70, CPUUsPerToken: 1.3, AllocBytesPerToken: 80},
		{Client: "bare", Events: 10, EventsPerSec: 100, CPUUsPerToken: 1, AllocBytesPerToken: 20},
	})
	if ratio == nil || ratio.EventsPerSec.String() != "0.70x" || ratio.AllocPerToken.String() != "4.00x" {
		t.Fatalf("ratio = %+v", ratio)
	}
	for _, c := range checks {
		if c.Met {
			t.Errorf("%s met, want missed", c.Name)
		}
	}
	res := ThroughputResult{Cases: []ThroughputCase{{Concurrency: 1, TokensPerWrite: 1, Checks: checks}}}
	var b bytes.Buffer
	if err := WriteThroughputTable(&b, res); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "MISSED") < 3 {
		t.Errorf("misses not marked:\n%s", b.String())
	}
}

func TestThroughputConfigValidate(t *testing.T) {
	t.Parallel()
	good := ThroughputConfig{Concurrency: []int{1}, TokensPerWrite: []int{1}, OutputTokens: 10, Duration: time.Second,
		Rounds: 1, Clients: twoBareClients(), StartServer: InProcessServer()}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*ThroughputConfig){
		"tokens per write": func(c *ThroughputConfig) { c.TokensPerWrite = []int{0} },
		"rounds":           func(c *ThroughputConfig) { c.Rounds = 0 },
		"duration":         func(c *ThroughputConfig) { c.Duration = 0 },
		"output tokens":    func(c *ThroughputConfig) { c.OutputTokens = 0 },
		"concurrency":      func(c *ThroughputConfig) { c.Concurrency = []int{5000} },
	} {
		c := good
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestChildServer(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no executable path:", err)
	}
	// The child is this test binary; TestMain turns it into the server.
	start := ChildServer(ExecLauncher(exe, childArg), os.Stderr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, stop, err := start(ctx, 16)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewBareClient(url, "m", nil).Stream(ctx, StreamRequest{OutputTokens: 40})
	if tr.Err != nil || tr.Frames() != 40 {
		t.Errorf("frames %d err %v, want 40 and no error", tr.Frames(), tr.Err)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

func TestVocabEvents(t *testing.T) {
	t.Parallel()
	block := []byte("aabbbc")
	ends := []int{2, 5, 6}
	for _, tt := range []struct {
		from, k int
		want    string
	}{{0, 1, "aa"}, {1, 2, "bbbc"}, {2, 2, "caa"}, {0, 3, "aabbbc"}, {1, 7, "bbbcaabbbcaabbb"}, {4, 1, "bbb"}} {
		if got := string(vocabEvents(block, ends, tt.from, tt.k)); got != tt.want {
			t.Errorf("vocabEvents(%d, %d) = %q, want %q", tt.from, tt.k, got, tt.want)
		}
	}
}
