package probe_test

// These tests run the real probe against the real simulator over loopback:
// the simulator's faults end in the right outcome, and detection names the
// simulator's header mode. (What the stall detector, now the aggregator's,
// finds of its blocked event loop is aggregate's acceptance tier.)

import (
	"context"
	"net/http"
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
