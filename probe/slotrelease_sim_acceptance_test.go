//go:build acceptance

package probe_test

// The slot-release measurement against the simulator's own record of when
// each abandoned request's slot was freed (sim.Server.AbandonTruths).

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// abandonRun sends 40 requests over 4 streams, half of them abandoned
// after 8 of their 64 tokens, to a simulator of the h100-7b profile (a
// decode step of about 10 ms), with the slot watch on; it returns the
// abandoned records and, by request id, the simulator's truth of each.
func abandonRun(t *testing.T, keep bool) ([]*event.Request, map[string]sim.AbandonTruth) {
	t.Helper()
	prof, err := sim.ProfileByName("h100-7b")
	if err != nil {
		t.Fatal(err)
	}
	url, srv := simtest.ServeServer(t, sim.Config{Profile: prof, Seed: 1, KeepAbandoned: keep})
	prom, err := collector.NewProm(collector.PromConfig{URL: url + "/metrics", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var runner *probe.Runner
	watch, err := collector.NewSlotWatch(collector.SlotWatchConfig{Prom: prom, Live: func() int { return runner.InFlight() }})
	if err != nil {
		t.Fatal(err)
	}
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	prompts, err := probe.NewPromptSource(context.Background(), probe.PromptConfig{
		PromptTokens: probe.Length{Mean: 100}, OutputTokens: probe.Length{Mean: 64}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runner, err = probe.NewRunner(client, probe.LoadConfig{Concurrency: 4, Requests: 40, Seed: 7,
		Cancel: probe.CancelPolicy{Tokens: 8, Share: 0.5}, SlotWatch: watch}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	var abandoned []*event.Request
	errors := 0
	if err := runner.Run(context.Background(), func(ev event.Event) {
		switch r := ev.Request; {
		case r == nil:
		case r.Abandoned():
			abandoned = append(abandoned, r)
		case r.Failed():
			errors++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if errors > 0 || len(abandoned) < 10 {
		t.Fatalf("%d errors, %d abandoned", errors, len(abandoned))
	}
	truth := map[string]sim.AbandonTruth{}
	for _, tr := range srv.AbandonTruths() {
		truth[tr.RequestID] = tr
	}
	return abandoned, truth
}

// releases are the measured releases, and the truth's (client gone → slot
// freed, on the simulator's clock), of the abandoned requests measured.
func releases(t *testing.T, recs []*event.Request, truth map[string]sim.AbandonTruth) (measured, real []time.Duration) {
	t.Helper()
	for _, r := range recs {
		a := r.Abandon
		if a.ReleaseSource == "" {
			continue
		}
		tr, ok := truth[r.ID]
		if !ok {
			t.Fatalf("%s: measured a release (%s) the simulator has no truth of", r.ID, a.Release)
		}
		measured = append(measured, a.Release)
		real = append(real, time.Duration(tr.ReleasedUnixNs-tr.GoneUnixNs))
	}
	// Nearly every one is measured: an abandoned request is not counted
	// by the watch only when the run's end comes first.
	if len(measured) < len(recs)*3/4 {
		t.Fatalf("%d of %d releases measured", len(measured), len(recs))
	}
	slices.Sort(measured)
	slices.Sort(real)
	return measured, real
}

func TestSlotReleaseAgainstTheSimulatorsTruth(t *testing.T) {
	recs, truth := abandonRun(t, false)
	freed, freedTruth := releases(t, recs, truth)
	recs, truth = abandonRun(t, true)
	kept, keptTruth := releases(t, recs, truth)
	med := func(d []time.Duration) time.Duration { return d[len(d)/2] }
	t.Logf("released at once: measured p50 %s (truth %s); decoded for nobody: measured p50 %s (truth %s)",
		med(freed), med(freedTruth), med(kept), med(keptTruth))

	// Every bound below only gets easier on a slow host: a slow scrape or
	// a late poll makes a measured release later, never earlier, and the
	// truth is the simulator's own engine time. The one way to measure
	// early is to take another request's drop for the abandoned one's,
	// which the watch's hold guards against; the median of the decoded
	// requests (about 56 steps of about 10 ms each for nobody) at half its
	// truth leaves that room.
	if med(kept) < med(keptTruth)/2 {
		t.Errorf("decoded for nobody: measured p50 %s, truth p50 %s: measured early", med(kept), med(keptTruth))
	}
	// Freed at once, the truth is about a step; decoding for nobody keeps
	// the slot some 56 steps: the two differ plainly whatever the host.
	if med(freedTruth)*10 > med(keptTruth) {
		t.Errorf("truth: freed p50 %s, decoded for nobody p50 %s: the simulator's modes do not differ", med(freedTruth), med(keptTruth))
	}
	if med(freed) >= med(kept) {
		t.Errorf("measured: freed p50 %s not below decoded for nobody p50 %s", med(freed), med(kept))
	}
}
