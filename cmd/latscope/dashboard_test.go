package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// TestQuittingTheDashboardIsNotAnInterruption drives the live dashboard with
// a "q" on its input: measuring stops, every request still ends in one
// outcome, and the run's exit is a normal one.
func TestQuittingTheDashboardIsNotAnInterruption(t *testing.T) {
	url := serveTinySim(t)
	f := &loadFlags{dialect: "auto", concurrency: 2, duration: time.Minute, promptTokens: "16", outputTokens: "4",
		timeout: time.Minute, maxEventBytes: 1 << 20, noGPU: true, noMetrics: true, arrival: "poisson", burstiness: 1,
		stepDuration: time.Second, seed: seedOne()}
	ctx := context.Background()
	o, err := f.sessionOptions(io.Discard, url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(ctx, io.Discard, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := session.Measurement{Pipe: s.PipelineConfig(), Agg: aggregate.Config{Now: time.Now}}
	summary, interrupted, err := session.RunWithDashboard(ctx, m, showDashboard, &tui.NoticeBoard{}, tui.Options{Input: strings.NewReader("q"), Output: io.Discard})
	if err != nil || interrupted {
		t.Fatalf("quitting the dashboard: %v (interrupted %v)", err, interrupted)
	}
	// Normal: 0, or 3 when q came after requests were sent but before any
	// succeeded (how fast the host is decides which), never 130.
	want := 0
	if r := summary.Requests; r.OK == 0 && r.Sent > 0 {
		want = exitAllFailed
	}
	if got := exitCode(io.Discard, session.Outcome(io.Discard, summary, nil, interrupted, err), nil); got != want {
		t.Fatalf("exit %d after q with %d ok, want %d", got, summary.Requests.OK, want)
	}
	if r := summary.Requests; r.Sent != r.OK+r.Errors+r.CancelledAtEnd {
		t.Fatalf("requests %+v: sent != ok + errors + cancelled at the end", r)
	}
}

// seedOne is --seed 1.
func seedOne() session.Seed {
	var s session.Seed
	_ = s.Set("1")
	return s
}
