package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// recordedAgent serves one agent's whole stream: its session header, then
// one successful request per TTFT, then the end.
func recordedAgent(t *testing.T, name string, ttfts []time.Duration) (*httptest.Server, []event.Event) {
	t.Helper()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	evs := []event.Event{event.NewSession(&event.Session{Time: at, Name: name, Target: "http://x", Load: event.Load{Mode: "closed"}})}
	for i, d := range ttfts {
		start := at.Add(time.Duration(i) * 100 * time.Millisecond)
		evs = append(evs, event.NewRequest(&event.Request{ID: fmt.Sprintf("%s-%d", name, i), Start: start, Intended: start,
			Outcome: event.OutcomeOK, TTFT: d, E2E: d + 50*time.Millisecond, OutputTokens: 1}))
	}
	var body strings.Builder
	for i, ev := range evs {
		b, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&body, "id: %d\ndata: %s\n\n", i+1, b)
	}
	body.WriteString("event: end\ndata: {}\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set(agent.StreamHeader, "run-"+name)
		_, _ = w.Write([]byte(body.String()))
	}))
	t.Cleanup(srv.Close)
	return srv, evs
}

// ttftSteps returns n durations from lo in steps of step milliseconds.
func ttftSteps(n int, lo, step float64) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration((lo + float64(i)*step) * float64(time.Millisecond))
	}
	return out
}

// attach --json's fleet is the agents' requests merged: its percentiles
// are those of one aggregator fed every agent's events, not the average of
// the agents' own, and its counts are their sum.
func TestAttachJSONMergesTheFleetExactly(t *testing.T) {
	t.Parallel()
	fast, fastEvs := recordedAgent(t, "fast", ttftSteps(200, 10, 0.5)) // 10-110 ms
	slow, slowEvs := recordedAgent(t, "slow", ttftSteps(50, 400, 4))   // 400-600 ms
	mid, midEvs := recordedAgent(t, "mid", ttftSteps(100, 100, 1))     // 100-200 ms
	out, stderr, err := execute(t, "attach", fast.URL, slow.URL, mid.URL, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var got struct {
		Fleet  aggregate.Summary
		Agents map[string]aggregate.Summary
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if len(got.Agents) != 3 {
		t.Fatalf("agents %v, want fast, slow and mid", keys(got.Agents))
	}
	union := aggregate.New(aggregate.Config{})
	for _, evs := range [][]event.Event{fastEvs, slowEvs, midEvs} {
		for _, ev := range evs {
			if ev.Request != nil {
				union.Add(ev)
			}
		}
	}
	want := union.Summary().TTFT
	f := got.Fleet.TTFT
	if f.Count != 350 || f.Count != want.Count || f.P50 != want.P50 || f.P90 != want.P90 || f.P99 != want.P99 || f.Max != want.Max {
		t.Errorf("fleet TTFT %+v, want the merged requests' %+v", f, want)
	}
	if got.Fleet.Requests.Sent != 350 {
		t.Errorf("fleet requests %d, want 350", got.Fleet.Requests.Sent)
	}
	var meanP99 float64
	for _, s := range got.Agents {
		meanP99 += s.TTFT.P99 / 3
	}
	if f.P99 == meanP99 {
		t.Errorf("fleet TTFT p99 %v is the agents' p99s averaged", f.P99)
	}
	t.Logf("fleet TTFT p50 %.1f p99 %.1f ms; the agents' p99s averaged: %.1f ms", f.P50, f.P99, meanP99)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// skewedAgent is a real agent whose clock is off by skew; it has served a
// whole session: requests at the same true times as its peers', dated by
// its own clock. It measures from region-<name>.
func skewedAgent(t *testing.T, name string, skew time.Duration, trueStart time.Time, n int) string {
	t.Helper()
	clock := func() time.Time { return time.Now().Add(skew) }
	srv, err := agent.New(agent.Config{Listen: agent.ListenConfig{Addr: "127.0.0.1:0", Token: "tok"}, Now: clock,
		Identity: agent.Identity{Name: name, Region: "region-" + name}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	at := trueStart.Add(skew) // the agent's reading of the true start
	evs := []event.Event{event.NewSession(&event.Session{Time: at, Name: name, Target: "http://x", Load: event.Load{Mode: "open"}})}
	for i := range n {
		start := at.Add(time.Duration(i) * 10 * time.Millisecond)
		evs = append(evs, event.NewRequest(&event.Request{ID: fmt.Sprintf("%s-%d", name, i), Start: start, Intended: start,
			Outcome: event.OutcomeOK, TTFT: 20 * time.Millisecond, E2E: 50 * time.Millisecond, OutputTokens: 1}))
	}
	for _, ev := range evs {
		if err := srv.Publish(ev); err != nil {
			t.Fatal(err)
		}
	}
	srv.End()
	return "http://" + ln.Addr().String()
}

// Agents whose clocks are off by +250 ms, 0 and -100 ms: attach estimates
// each offset (within half the round trip of its best ping) and aligns the
// fleet's timeline by it, so requests sent at the same true times span
// what they spanned, not 350 ms more.
func TestAttachAlignsTheFleetByEachAgentsClock(t *testing.T) {
	t.Parallel()
	trueStart := time.Now().Truncate(time.Millisecond)
	skews := map[string]time.Duration{"ahead": 250 * time.Millisecond, "exact": 0, "behind": -100 * time.Millisecond}
	var urls []string
	for name, skew := range skews {
		urls = append(urls, skewedAgent(t, name, skew, trueStart, 100))
	}
	out, stderr, err := execute(t, append([]string{"attach", "--no-tui", "--json", "--token", "tok"}, urls...)...)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var got struct {
		Fleet struct {
			Start, End time.Time
		}
		Connections map[string]agentConnection
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	worst := 0.0
	for name, skew := range skews {
		c := got.Connections[name]
		if c.ClockOffsetMS == nil {
			t.Fatalf("agent %s: no clock offset (%q)\n%s", name, c.ClockError, stderr)
		}
		if c.Region != "region-"+name || c.ClockEstimates != 1 || c.ClockError != "" {
			t.Errorf("agent %s: region %q, %d clock estimates (%q): want its region and one estimate, for its one connection", name, c.Region, c.ClockEstimates, c.ClockError)
		}
		miss := math.Abs(*c.ClockOffsetMS - ms(skew))
		t.Logf("agent %s: clock %+v ms, estimated %+.3f ms (bound %.3f ms)", name, ms(skew), *c.ClockOffsetMS, *c.ClockBoundMS)
		if miss > *c.ClockBoundMS+0.001 {
			t.Errorf("agent %s: offset %.3f ms, true %v: off by %.3f ms, beyond its bound %.3f ms", name, *c.ClockOffsetMS, skew, miss, *c.ClockBoundMS)
		}
		worst = max(worst, *c.ClockBoundMS)
	}
	for _, name := range []string{"ahead", "behind"} {
		if !strings.Contains(stderr, name+": warning: its clock is") {
			t.Errorf("no warning about %s's clock:\n%s", name, stderr)
		}
	}
	// Aligned: the fleet starts at the true start and spans the true
	// 99 x 10 ms + 50 ms, each within the estimates' bound.
	slack := time.Duration((2*worst + 0.001) * float64(time.Millisecond))
	if d := got.Fleet.Start.Sub(trueStart).Abs(); d > slack {
		t.Errorf("the fleet starts %v from the true start (slack %v): not aligned", d, slack)
	}
	if span, want := got.Fleet.End.Sub(got.Fleet.Start), 99*10*time.Millisecond+50*time.Millisecond; (span - want).Abs() > slack {
		t.Errorf("the fleet spans %v, want %v (slack %v): the agents' clocks were not aligned", span, want, slack)
	}
}
