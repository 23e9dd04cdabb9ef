//go:build acceptance

package session_test

// Acceptance tier (go test -tags acceptance -p 1): latscope watch against
// the simulator's own background traffic, in real time, judged by the
// simulator's truth of the same requests.

import (
	"context"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/sim"
)

// TestWatchBreakdownMatchesSimTruth: the breakdown of all traffic that
// watch derives from the server's histograms puts each phase's share of
// end-to-end within 5 points of the simulator's truth over the same time.
func TestWatchBreakdownMatchesSimTruth(t *testing.T) {
	srv, err := sim.New(sim.Config{TokenizerPool: 2, MaxNumSeqs: 16,
		Background: sim.Background{Rate: 20, PromptTokens: 256, OutputTokens: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	go func() { _ = srv.Serve(ctx, ln) }()
	target := "http://" + ln.Addr().String()

	o := session.Options{
		Conn:    &session.Connection{Target: target, Shown: target, Timeout: 5 * time.Second},
		Dialect: "auto", Version: "test",
		Metrics: session.Metrics{Interval: 500 * time.Millisecond},
		GPU:     session.GPU{Off: true},
	}
	s, err := session.OpenWatch(ctx, io.Discard, o, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := srv.BackgroundTruth()
	m := session.Measurement{Pipe: s.PipelineConfig(), Agg: aggregate.Config{Now: time.Now}}
	summary, _, err := m.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := srv.BackgroundTruth()
	if summary.Traffic == nil || len(summary.Traffic.Phases) != 4 {
		t.Fatalf("watch gave no breakdown: %+v", summary.Traffic)
	}
	truth := map[string]float64{
		aggregate.PhaseQueue:   after.All.QueueSeconds - before.All.QueueSeconds,
		aggregate.PhasePrefill: after.All.PrefillSeconds - before.All.PrefillSeconds,
		aggregate.PhaseDecode:  after.All.DecodeSeconds - before.All.DecodeSeconds,
	}
	e2e := after.All.E2ESeconds - before.All.E2ESeconds
	n := after.All.Requests - before.All.Requests
	if n < 30 {
		t.Fatalf("only %d requests finished in 20 s at 20/s (want 30 or more): the host did not keep pace with the simulator", n)
	}
	truth[aggregate.PhaseRest] = e2e - truth[aggregate.PhaseQueue] - truth[aggregate.PhasePrefill] - truth[aggregate.PhaseDecode]
	tr := summary.Traffic
	t.Logf("%d requests (watch: %.0f); watch vs truth, share of end-to-end:", n, tr.Requests)
	for _, p := range tr.Phases {
		want := truth[p.Name] / e2e
		t.Logf("  %-8s %5.1f%%  truth %5.1f%%", p.Name, 100*p.Share, 100*want)
		if math.Abs(p.Share-want) > 0.05 {
			t.Errorf("%s: watch %.1f%%, truth %.1f%%: more than 5 points apart", p.Name, 100*p.Share, 100*want)
		}
	}
	if math.Abs(tr.Requests-float64(n)) > 0.1*float64(n) {
		t.Errorf("watch counted %.0f requests, the simulator finished %d", tr.Requests, n)
	}
}

// TestWatchSpansMatchSimTruth: the users' requests that watch makes of the
// server's spans (--otlp-listen) put each phase's share of their
// end-to-end time within 5 points of the simulator's truth of its own
// traffic over the same time, and count about as many requests.
func TestWatchSpansMatchSimTruth(t *testing.T) {
	otlpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sim.New(sim.Config{TokenizerPool: 2, MaxNumSeqs: 16, OTLPEndpoint: "http://" + otlpLn.Addr().String() + "/v1/traces",
		Background: sim.Background{Rate: 20, PromptTokens: 256, OutputTokens: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	go func() { _ = srv.Serve(ctx, ln) }()
	target := "http://" + ln.Addr().String()
	o := session.Options{
		Conn:    &session.Connection{Target: target, Shown: target, Timeout: 5 * time.Second},
		Dialect: "auto", Version: "test",
		Metrics: session.Metrics{Interval: 500 * time.Millisecond},
		GPU:     session.GPU{Off: true},
		Extras:  &session.Extras{Spans: collector.NewOTLPReceiver(collector.OTLPConfig{Listener: otlpLn})},
	}
	s, err := session.OpenWatch(ctx, io.Discard, o, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := srv.BackgroundTruth()
	m := session.Measurement{Pipe: s.PipelineConfig(), Agg: aggregate.Config{Now: time.Now}}
	summary, _, err := m.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := srv.BackgroundTruth()
	n := after.Background.Requests - before.Background.Requests
	if n < 30 {
		t.Fatalf("only %d requests finished in 15 s at 20/s (want 30 or more): the host did not keep pace with the simulator", n)
	}
	if summary.Traffic == nil || summary.Traffic.Spans == nil {
		t.Fatalf("watch made no users' records of the spans: %+v", summary.Traffic)
	}
	u := summary.Traffic.Spans
	e2e := after.Background.E2ESeconds - before.Background.E2ESeconds
	truth := map[string]float64{
		aggregate.PhaseQueue:   (after.Background.QueueSeconds - before.Background.QueueSeconds) / e2e,
		aggregate.PhasePrefill: (after.Background.PrefillSeconds - before.Background.PrefillSeconds) / e2e,
		aggregate.PhaseDecode:  (after.Background.DecodeSeconds - before.Background.DecodeSeconds) / e2e,
	}
	t.Logf("%d requests (spans: %d); spans vs truth, share of end-to-end:", n, u.Requests)
	for name, want := range truth {
		got := u.Shares[name]
		t.Logf("  %-8s %5.1f%%  truth %5.1f%%", name, 100*got, 100*want)
		if math.Abs(got-want) > 0.05 {
			t.Errorf("%s: spans %.1f%%, truth %.1f%%: more than 5 points apart", name, 100*got, 100*want)
		}
	}
	if math.Abs(float64(u.Requests-n)) > 0.1*float64(n) {
		t.Errorf("the spans gave %d requests, the simulator finished %d", u.Requests, n)
	}
	if summary.Requests.Sent != 0 {
		t.Errorf("the users' records were counted as latscope's own: sent %d", summary.Requests.Sent)
	}
}
