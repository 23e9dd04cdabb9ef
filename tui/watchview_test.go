package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// watchFrame is a watch session with a canary: ten seconds of a vLLM
// server's own traffic and one canary request.
func watchFrame() Frame {
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	now := t0.Add(10 * time.Second)
	a := aggregate.New(aggregate.Config{Now: func() time.Time { return now }})
	a.Add(event.NewSession(&event.Session{Time: t0, Target: "http://gpu-7:8000", Server: "vllm",
		Load: event.Load{Mode: event.LoadCanary, Rate: 0.5}}))
	bounds := []float64{0.1, 0.25, 1}
	for i := range 10 {
		a.Add(event.NewServer(&event.ServerSample{Time: t0.Add(time.Duration(i) * time.Second), Source: "m", Dialect: "vllm",
			Interval: time.Second, Waiting: new(4.0), KVCache: new(0.5), Preemptions: new(1.0),
			PrefixQueries: new(100.0), PrefixHits: new(25.0),
			Stages: map[string]event.HistStat{
				"queue":   {Count: 10, Mean: 600 * time.Millisecond},
				"prefill": {Count: 10, Mean: 30 * time.Millisecond},
				"decode":  {Count: 10, Mean: 360 * time.Millisecond},
				"e2e":     {Count: 10, Mean: time.Second},
				"ttft":    {Count: 10, Mean: 200 * time.Millisecond, Bounds: bounds, Counts: []float64{0, 10, 0, 0}},
			}}))
	}
	r := &event.Request{ID: "c1", Intended: t0.Add(8 * time.Second), Start: t0.Add(8 * time.Second), Outcome: event.OutcomeOK,
		TTFT: 180 * time.Millisecond, E2E: 400 * time.Millisecond, OutputTokens: 2, Flags: []event.Flag{event.FlagCanary},
		Chunks: []event.Chunk{{At: 180 * time.Millisecond, Tokens: 1}, {At: 400 * time.Millisecond, Tokens: 1}}}
	a.Add(event.NewRequest(r))
	return Frame{Snapshot: a.Snapshot(now)}
}

func TestWatchView(t *testing.T) {
	t.Parallel()
	feed := &stepFeed{}
	feed.set(watchFrame())
	m := newModel(feed, Options{}, plainRenderer())
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	m.Update(tickMsg{})
	view := m.View()
	for _, want := range []string{
		"watching + canary 0.5/s", "your users", "vllm histograms", " 10s ▕", " run ▕",
		"queue 60%", "prefill 3%", "decode 36%", "rest 1%", "of e2e",
		"bucket estimate (±bucket)", "≈175 ms (100ms–250ms)", "canary (client-measured)",
		"KV 50% · preempted 9 · prefix hits 25%", "queue: users 60% of e2e",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("watch view lacks %q:\n%s", want, view)
		}
	}
	// Narrow terminals still draw every line within their width.
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	for i, l := range strings.Split(m.View(), "\n") {
		if w := visibleWidth(l); w > 80 {
			t.Errorf("line %d is %d cells wide at 80: %q", i, w, l)
		}
	}
}
