package session_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// TestWatchListsUsersFromServerSpans: the simulator's own traffic sends its
// vLLM-shaped spans over real loopback OTLP/HTTP to a watch's receiver; each
// becomes one user's record, flagged server-reported, with the span's
// times, listed in the request sample and counted apart from latscope's
// own requests (there are none). No bound here depends on the host's pace.
func TestWatchListsUsersFromServerSpans(t *testing.T) {
	otlpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	target := simtest.Serve(t, sim.Config{Profile: prof, OTLPEndpoint: "http://" + otlpLn.Addr().String() + "/v1/traces",
		Background: sim.Background{Rate: 20, PromptTokens: 32, OutputTokens: 8}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	o := session.Options{
		Conn:    &session.Connection{Target: target, Shown: target, Timeout: 5 * time.Second},
		Dialect: "auto", Version: "test",
		Metrics: session.Metrics{Interval: 200 * time.Millisecond},
		GPU:     session.GPU{Off: true},
		Extras:  &session.Extras{Spans: collector.NewOTLPReceiver(collector.OTLPConfig{Listener: otlpLn})},
	}
	s, err := session.OpenWatch(ctx, io.Discard, o, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const want = 10
	var (
		mu   sync.Mutex
		seen = map[string]*event.Request{}
	)
	m := session.Measurement{Pipe: s.PipelineConfig(), Agg: aggregate.Config{Now: time.Now},
		Observers: []func(aggregate.Snapshot){func(snap aggregate.Snapshot) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range snap.Sample.Latest {
				seen[r.ID] = r
			}
			if u := snap.Windows[aggregate.WinRun].Traffic.Spans; u != nil && u.Requests >= want {
				cancel()
			}
		}}}
	summary, _, err := m.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if t.Context().Err() == nil && ctx.Err() == context.DeadlineExceeded {
		t.Fatal("no users' spans within a minute")
	}
	if summary.Requests.Sent != 0 || summary.TTFT.Count != 0 {
		t.Errorf("the users' records reached latscope's own figures: sent %d, ttft %+v", summary.Requests.Sent, summary.TTFT)
	}
	u := summary.Traffic.Spans
	if u == nil || u.Requests < want || u.Queue.Count != u.Requests || u.Decode.Count != u.Requests || u.TTFT.Count != u.Requests {
		t.Fatalf("users' spans in the summary: %+v", u)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the request sample listed none")
	}
	for id, r := range seen {
		if !r.HasFlag(event.FlagServerReported) || !strings.Contains(id, "user-") {
			t.Errorf("%s: not a user's server-reported record: %+v", id, r.Flags)
		}
		var sum time.Duration
		for _, st := range r.Breakdown {
			sum += st.Duration
		}
		if len(r.Breakdown) != 3 || sum != r.TTFT || r.E2E < r.TTFT || r.Server == nil || r.Server.Stages[event.StageDecode] <= 0 {
			t.Errorf("%s: breakdown %+v (ttft %v, e2e %v)", id, r.Breakdown, r.TTFT, r.E2E)
		}
	}
}

// TestCanaryBesideUsersFromServerSpans: beside a canary, the simulator's
// spans of the canary's own requests join those requests (which keep the
// canary flag and take the server's timing; the run ends once three have),
// and only the other spans,
// its own traffic's, become users' records: no record is both, and none of
// the canary's is counted as a user's.
func TestCanaryBesideUsersFromServerSpans(t *testing.T) {
	otlpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	target := simtest.Serve(t, sim.Config{Profile: prof, OTLPEndpoint: "http://" + otlpLn.Addr().String() + "/v1/traces",
		Background: sim.Background{Rate: 20, PromptTokens: 32, OutputTokens: 8}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	prompt, err := probe.ParseLength("16")
	if err != nil {
		t.Fatal(err)
	}
	output, err := probe.ParseLength("4")
	if err != nil {
		t.Fatal(err)
	}
	o := session.Options{
		Conn:    &session.Connection{Target: target, Shown: target, Timeout: 5 * time.Second},
		Dialect: "auto", Version: "test",
		Prompts: probe.PromptConfig{PromptTokens: prompt, OutputTokens: output},
		Load:    probe.LoadConfig{Rate: 5, Arrival: probe.ArrivalConstant, Duration: time.Minute, Seed: 1},
		Metrics: session.Metrics{Interval: 200 * time.Millisecond},
		GPU:     session.GPU{Off: true},
		Extras:  &session.Extras{Spans: collector.NewOTLPReceiver(collector.OTLPConfig{Listener: otlpLn})},
	}
	s, err := session.OpenCanary(ctx, io.Discard, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var (
		mu   sync.Mutex
		seen = map[string]*event.Request{}
	)
	m := session.Measurement{Pipe: s.PipelineConfig(), Agg: aggregate.Config{Now: time.Now},
		Observers: []func(aggregate.Snapshot){func(snap aggregate.Snapshot) {
			mu.Lock()
			defer mu.Unlock()
			canaries := 0
			for _, r := range snap.Sample.Latest {
				seen[r.ID] = r
			}
			for _, r := range seen {
				if r.HasFlag(event.FlagCanary) && r.Server != nil && r.Server.Source == event.SourceOTLP {
					canaries++ // joined to its span
				}
			}
			if u := snap.Windows[aggregate.WinRun].Traffic.Spans; u != nil && u.Requests >= 10 && canaries >= 3 {
				cancel()
			}
		}}}
	summary, _, err := m.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if t.Context().Err() == nil && ctx.Err() == context.DeadlineExceeded {
		t.Fatal("no canary requests and users' spans within a minute")
	}
	mu.Lock()
	defer mu.Unlock()
	var canaries, users int
	for id, r := range seen {
		canary, user := r.HasFlag(event.FlagCanary), r.HasFlag(event.FlagServerReported)
		switch {
		case canary && user:
			t.Errorf("%s is both the canary's and a user's", id)
		case user:
			users++
			if !strings.Contains(id, "user-") {
				t.Errorf("%s: a user's record that is not the simulator's own traffic", id)
			}
		case canary && r.Server != nil && r.Server.Source == event.SourceOTLP:
			canaries++ // a canary request that took its span (the last ones may have ended before theirs came)
		}
	}
	if canaries < 3 || users == 0 {
		t.Fatalf("listed %d canary requests joined to their spans and %d users' requests, want 3 and some", canaries, users)
	}
	if rq := summary.Requests; rq.Flags[event.FlagServerReported] != 0 || rq.Finished() != rq.Flags[event.FlagCanary] {
		t.Errorf("latscope's own requests: %d finished, flags %v: want the canary's alone", rq.Finished(), rq.Flags)
	}
}
