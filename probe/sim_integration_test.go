package probe_test

// These tests run the real probe against the real simulator over loopback:
// the acceptance checks that the simulator's faults end in the right outcome
// and that its blocked event loop is what the stall detector finds.

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// startSim serves a simulator on a loopback port for the test's lifetime.
func startSim(t *testing.T, cfg sim.Config) string {
	t.Helper()
	srv, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String()
}

func tinyProfile(t *testing.T) sim.Profile {
	t.Helper()
	p, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runAgainst sends n requests through the real Runner and Client and
// returns the run's stats and every record.
func runAgainst(t *testing.T, url string, headers http.Header, n, promptTokens, outputTokens int) (probe.RunStats, []*event.Request) {
	t.Helper()
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel,
		Headers: headers, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{
		PromptTokens: probe.Length{Mean: promptTokens}, OutputTokens: probe.Length{Mean: outputTokens}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, probe.LoadConfig{Concurrency: 2, Requests: n}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*event.Request
	err = runner.Run(ctx, func(ev event.Event) {
		if ev.Request != nil {
			recs = append(recs, ev.Request)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return runner.Stats(), recs
}

func TestSimFaultsEndInTheRightOutcome(t *testing.T) {
	url := startSim(t, sim.Config{Profile: tinyProfile(t), Seed: 1})
	cases := []struct {
		fault  string
		want   event.Outcome
		status int
		check  func(t *testing.T, r *event.Request)
	}{
		{fault: "status=429", want: event.OutcomeHTTPStatus, status: 429},
		{fault: "status=500", want: event.OutcomeHTTPStatus, status: 500},
		{fault: "status=503", want: event.OutcomeHTTPStatus, status: 503},
		{fault: "reset-after=3", want: event.OutcomeStreamReset},
		{fault: "malformed-after=3", want: event.OutcomeMalformed},
		{fault: "oversized", want: event.OutcomeOversized},
		{fault: "stall=150", want: event.OutcomeOK, check: func(t *testing.T, r *event.Request) {
			longest := time.Duration(0)
			for _, g := range r.ITLs() {
				longest = max(longest, g)
			}
			// The gap is seen between two arrivals, each timestamped when its
			// read returned: allow a few ms for the frame before the stall
			// having been read late.
			if longest < 140*time.Millisecond {
				t.Errorf("longest gap %v, want the 150 ms stall mid-stream", longest)
			}
		}},
		{fault: "slow-headers=150", want: event.OutcomeOK, check: func(t *testing.T, r *event.Request) {
			for _, st := range r.Stages {
				if st.Stage == event.StageWaitHeaders && st.Duration < 140*time.Millisecond {
					t.Errorf("wait_headers %v, want at least the 150 ms the server held its headers", st.Duration)
				}
			}
		}},
		{fault: "split-utf8", want: event.OutcomeOK, check: func(t *testing.T, r *event.Request) {
			if !r.HasFlag(event.FlagUTF8Defect) || r.ReplacementChars == 0 {
				t.Errorf("flags %v, replacements %d: want the split character counted as a defect", r.Flags, r.ReplacementChars)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.fault, func(t *testing.T) {
			h := http.Header{}
			h.Set(sim.FaultHeader, tc.fault)
			const n = 4
			stats, recs := runAgainst(t, url, h, n, 16, 8)
			if stats.Sent != n || stats.Sent != stats.OK+stats.Errors || len(recs) != n {
				t.Fatalf("sent %d, ok %d, errors %d, records %d: want %d sent = ok + errors, one record each",
					stats.Sent, stats.OK, stats.Errors, len(recs), n)
			}
			for _, r := range recs {
				if r.Outcome != tc.want {
					t.Fatalf("outcome %q (%s), want %q", r.Outcome, r.Error, tc.want)
				}
				if tc.status != 0 && r.Status != tc.status {
					t.Errorf("status %d, want %d", r.Status, tc.status)
				}
				if tc.check != nil {
					tc.check(t, r)
				}
			}
		})
	}
}

// stallScenario streams four long decodes from the calibrated simulator,
// then lands a burst of 8K-token prompts on it, and returns the stall
// markers the detector finds in the decoding streams' records.
func stallScenario(t *testing.T, tokenizerPool int) []event.Marker {
	t.Helper()
	prof, err := sim.ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	url := startSim(t, sim.Config{Profile: prof, TokenizerPool: tokenizerPool, Seed: 1})
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	long, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 8192}, OutputTokens: probe.Length{Mean: 4}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	short, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 32}, OutputTokens: probe.Length{Mean: 300}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	decoding := make(chan *event.Request, 4)
	for i := range 4 {
		go func() {
			p, pt, ot := short.Next(uint64(i))
			decoding <- client.Do(ctx, probe.RequestSpec{ID: "decode-" + string(rune('a'+i)), Prompt: p, PromptTokens: pt, OutputTokens: ot})
		}()
	}
	// Land the burst late in the decodes: the burst's chunked prefill then
	// slows only their last steps, so each stream's median gap stays the
	// normal decode step (a stall is judged against that median).
	time.Sleep(2 * time.Second)
	burstCtx, cancelBurst := context.WithCancel(ctx)
	defer cancelBurst()
	const burstSize = 16 // ~6.5 ms of tokenization each: ~100 ms of blocked loop
	burst := make(chan *event.Request, burstSize)
	for i := range burstSize {
		go func() {
			p, pt, ot := long.Next(uint64(i))
			burst <- client.Do(burstCtx, probe.RequestSpec{ID: "long-" + string(rune('a'+i)), Prompt: p, PromptTokens: pt, OutputTokens: ot})
		}()
	}
	det := probe.NewStallDetector(probe.StallConfig{})
	var markers []event.Marker
	for range 4 {
		r := <-decoding
		if !r.OK() {
			t.Fatalf("decode stream failed: %s %s", r.Outcome, r.Error)
		}
		markers = append(markers, det.Add(r)...)
	}
	cancelBurst() // their prefill is not the subject; stop it
	for range burstSize {
		<-burst
	}
	return append(markers, det.Flush()...)
}

// Both stall tests allow a retry. On a 2-core machine shared with other
// work, a burst's requests can reach the server's loop spread out enough that
// decode frames slip between their tokenizations (splitting one long pause
// into short ones), and the whole process can pause now and then, which looks
// exactly like a stall to any client. Both are rare; the behaviour under test
// is not: the blocking tokenizer stalls in most runs and the pooled one almost
// never does.
const stallAttempts = 3

func TestStallDetectorSeesBlockedTokenizer(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	for range stallAttempts {
		if markers := stallScenario(t, 0); len(markers) > 0 {
			t.Logf("blocking tokenizer: %s", markers[0].Message)
			return
		}
	}
	t.Fatalf("no stall marker in %d runs: 8K-token prompts tokenized on the server's event loop should pause every stream together", stallAttempts)
}

func TestStallDetectorQuietWithTokenizerPool(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	var last []event.Marker
	for range stallAttempts {
		if last = stallScenario(t, 2); len(last) == 0 {
			return
		}
	}
	t.Fatalf("stall markers with the tokenizer off the event loop: %s", last[0].Message)
}
