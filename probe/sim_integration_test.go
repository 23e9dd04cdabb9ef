package probe_test

// These tests run the real probe against the real simulator over loopback:
// the acceptance checks that the simulator's faults end in the right outcome
// and that its blocked event loop is what the stall detector finds.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// startSim serves a simulator on a loopback port for the test's lifetime.
func startSim(t *testing.T, cfg sim.Config) string {
	t.Helper()
	return simtest.Serve(t, cfg)
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
	// Open loop: it never pauses, where a closed-loop worker would wait out
	// the Retry-After the simulator sends with a 429 or 503.
	runner, err := probe.NewRunner(client, probe.LoadConfig{Rate: 1000, Arrival: probe.ArrivalConstant, Requests: n}, prompts)
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
			// The simulator pauses 150 ms after the 4th of the 8 tokens, so
			// the 5th arrives at least 150 ms after the 4th was generated,
			// which was after the request started. The gap before it is
			// therefore at least 150 ms less the time the 4th took to
			// arrive: exact, however late a busy machine let the probe
			// read, where a fixed floor under 150 ms was not.
			if len(r.Chunks) != 8 {
				t.Fatalf("%d content chunks, want 8", len(r.Chunks))
			}
			before, after := r.Chunks[3].At, r.Chunks[4].At
			if gap := after - before; gap < 150*time.Millisecond-before {
				t.Errorf("gap across the stall %v, want at least 150 ms less the %v the token before it took", gap, before)
			}
		}},
		{fault: "slow-headers=150", want: event.OutcomeOK, check: func(t *testing.T, r *event.Request) {
			// The server held its headers 150 ms after the request arrived,
			// which was after it started: the stages up to the headers add
			// up to at least that, however the time splits between them.
			var toHeaders time.Duration
			for _, st := range r.Stages {
				toHeaders += st.Duration
				if st.Stage == event.StageWaitHeaders {
					break
				}
			}
			if toHeaders < 150*time.Millisecond {
				t.Errorf("start to headers %v (stages %+v), want at least the 150 ms the server held its headers", toHeaders, r.Stages)
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

// Detector defaults the stall tests reason with (probe.StallConfig's zero
// value): a gap counts above stallFactor × the stream's median gap and
// above stallMinGap, and stallMinStreams streams must share the pause.
const (
	stallFactor     = 5
	stallMinGap     = 20 * time.Millisecond
	stallMinStreams = 3
	decodeStreams   = 4
)

// slowTokenizerProfile is h100-7b with a tokenizer about 20 times slower
// (a pure-Python tokenizer with a long chat template): one 8K-token prompt
// then takes about 100 ms to tokenize, in one piece. A burst of faster
// prompts would block the loop as long in total, but on a busy machine
// its requests reach the loop spread out and decode frames slip between
// their tokenizations, so whether the streams pause together would depend
// on the machine; one long tokenization does not.
func slowTokenizerProfile(t *testing.T) sim.Profile {
	t.Helper()
	p, err := sim.ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	p.Name = "h100-7b-slow-tokenizer"
	p.TokenizePerToken = 12 * time.Microsecond
	return p
}

// stallRun is what stallScenario saw: the decode streams' records, the
// server's flush time of each of their content frames, every request's
// ground truth, and the stall markers the detector made of the records.
type stallRun struct {
	recs    []*event.Request
	flushes map[string][]time.Time
	truths  map[string]sim.Truth
	longID  string
	markers []event.Marker
	watch   *busyWatch // when the host held this process up
}

// stallScenario streams four long decodes and, once each has had 40
// frames flushed, sends one 8K-token prompt. With the tokenizer on the
// server's event loop, that prompt's tokenization holds every stream's
// frames for about 100 ms; with a tokenizer pool it holds none.
func stallScenario(t *testing.T, tokenizerPool int) stallRun {
	t.Helper()
	run := stallRun{flushes: map[string][]time.Time{}, truths: map[string]sim.Truth{}, longID: "long", watch: watchBusy(t)}
	defer run.watch.done()
	var (
		mu sync.Mutex
		// frozen is set when the scenario returns: the server may still
		// flush to, or finish, a request whose client has gone.
		frozen       bool
		ready        = make(chan struct{})
		longFinished = make(chan struct{})
		once         sync.Once
	)
	onFrame := func(f sim.FrameInfo) { // on the server's loop, in flush order
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			return
		}
		run.flushes[f.RequestID] = append(run.flushes[f.RequestID], f.At)
		started := 0
		for i := range decodeStreams {
			if len(run.flushes[decodeID(i)]) >= 40 {
				started++
			}
		}
		if started == decodeStreams {
			once.Do(func() { close(ready) })
		}
	}
	onFinish := func(tr sim.Truth) {
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			return
		}
		run.truths[tr.RequestID] = tr
		if tr.RequestID == run.longID {
			close(longFinished)
		}
	}
	url := startSim(t, sim.Config{Profile: slowTokenizerProfile(t), TokenizerPool: tokenizerPool, Seed: 1, OnFrame: onFrame, OnFinish: onFinish})
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx := t.Context()
	long, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 8192}, OutputTokens: probe.Length{Mean: 4}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	short, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 32}, OutputTokens: probe.Length{Mean: 300}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	decoding := make(chan *event.Request, decodeStreams)
	for i := range decodeStreams {
		go func() {
			p, pt, ot := short.Next(uint64(i))
			decoding <- client.Do(ctx, probe.RequestSpec{ID: decodeID(i), Prompt: p, PromptTokens: pt, OutputTokens: ot})
		}()
	}
	// Land the prompt well into the decodes (an event, not a sleep), so
	// each stream's median gap is its normal decode step.
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("the decode streams never got going")
	}
	longCtx, cancelLong := context.WithCancel(ctx)
	longDone := make(chan *event.Request, 1)
	go func() {
		p, pt, ot := long.Next(0)
		longDone <- client.Do(longCtx, probe.RequestSpec{ID: run.longID, Prompt: p, PromptTokens: pt, OutputTokens: ot})
	}()
	det := probe.NewStallDetector(probe.StallConfig{})
	for range decodeStreams {
		r := <-decoding
		if !r.OK() {
			t.Fatalf("decode stream failed: %s %s", r.Outcome, r.Error)
		}
		run.recs = append(run.recs, r)
		run.markers = append(run.markers, det.Add(r)...)
	}
	cancelLong() // done or not, it is a request of the probe's: evidence
	longReq := <-longDone
	run.markers = append(run.markers, det.Add(longReq)...)
	run.markers = append(run.markers, det.Flush()...)
	if longReq.OK() { // its truth comes once the server's handler ends, after the client saw the end
		select {
		case <-longFinished:
		case <-ctx.Done():
			t.Fatal("the long prompt's truth never came")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	frozen = true
	for _, r := range run.recs {
		if n := len(run.flushes[r.ID]); n != len(r.Chunks) {
			t.Fatalf("%s: the server flushed %d content frames, the probe saw %d chunks", r.ID, n, len(r.Chunks))
		}
	}
	return run
}

func decodeID(i int) string { return fmt.Sprintf("decode-%d", i) }

// at is when the probe received chunk j of r.
func at(r *event.Request, j int) time.Time { return r.Start.Add(r.Chunks[j].At) }

// medianGap is the median of r's gaps between content chunks.
func medianGap(r *event.Request) time.Duration {
	gaps := r.ITLs()
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}

// TestDetectSimHeaderModes: the simulator's model list says when its
// headers leave, and detection names the kind that carries it.
func TestDetectSimHeaderModes(t *testing.T) {
	t.Parallel()
	for mode, want := range map[sim.HeaderTiming]string{
		sim.HeadersAtOnce:     probe.ServerLatscopeSim,
		sim.HeadersSlotted:    probe.ServerLatscopeSimSlotted,
		sim.HeadersFirstToken: probe.ServerLatscopeSimFirstToken,
	} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			url := startSim(t, sim.Config{Headers: mode})
			got, err := probe.Detect(context.Background(), probe.Endpoint{BaseURL: url})
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != want || got.Dialect != probe.DialectOpenAIChat || !probe.IsLatscopeSim(got.Server) {
				t.Errorf("detected %+v, want %s", got, want)
			}
		})
	}
}
