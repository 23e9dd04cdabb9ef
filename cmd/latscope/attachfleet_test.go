package main

import (
	"encoding/json"
	"fmt"
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

// ms returns n durations from lo in steps of step milliseconds.
func ms(n int, lo, step float64) []time.Duration {
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
	fast, fastEvs := recordedAgent(t, "fast", ms(200, 10, 0.5)) // 10-110 ms
	slow, slowEvs := recordedAgent(t, "slow", ms(50, 400, 4))   // 400-600 ms
	mid, midEvs := recordedAgent(t, "mid", ms(100, 100, 1))     // 100-200 ms
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
