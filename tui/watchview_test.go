package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// watchFrame is a watch session with a canary: ten seconds of a vLLM
// server's own traffic and one canary request.
func watchFrame() Frame { return watchFrameWith(0) }

// watchFrameWith is watchFrame with users spans of the server's users'
// requests (latscope watch --otlp-listen).
func watchFrameWith(users int) Frame {
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
	for i := range users {
		end := t0.Add(time.Duration(5000+400*i) * time.Millisecond)
		ttft := time.Duration(60+10*i) * time.Millisecond
		e2e := ttft + 300*time.Millisecond
		a.Add(event.NewRequest(&event.Request{ID: fmt.Sprintf("cmpl-user-%d", i+1), Intended: end.Add(-e2e), Start: end.Add(-e2e),
			Outcome: event.OutcomeOK, TTFT: ttft, E2E: e2e, PromptTokens: 256, OutputTokens: 64,
			Flags: []event.Flag{event.FlagServerReported},
			Breakdown: []event.StageTiming{
				{Stage: event.StageUnattributed, Duration: 2 * time.Millisecond, Provenance: event.ServerReported, Source: "otlp span: ttft − queue − prefill"},
				{Stage: event.StageQueue, Duration: ttft - 32*time.Millisecond, Provenance: event.ServerReported, Source: "otlp span"},
				{Stage: event.StagePrefill, Duration: 30 * time.Millisecond, Provenance: event.ServerReported, Source: "otlp span"},
			},
			Server: &event.ServerTiming{Source: event.SourceOTLP, Stages: map[event.Stage]time.Duration{
				event.StageServerTTFT: ttft, event.StageQueue: ttft - 32*time.Millisecond, event.StagePrefill: 30 * time.Millisecond,
				event.StageDecode: 290 * time.Millisecond, event.StageServerE2E: e2e}}}))
	}
	return Frame{Snapshot: a.Snapshot(now)}
}

// TestGoldenWatchSpans: the watch view with the users' requests from the
// server's spans, their list in the requests view, and one's waterfall.
func TestGoldenWatchSpans(t *testing.T) {
	for _, size := range goldenSizes {
		w, h := size[0], size[1]
		feed := &stepFeed{}
		feed.set(watchFrameWith(6))
		m := newModel(feed, Options{}, plainRenderer())
		m.Update(sizeMsg(w, h))
		m.Update(tickMsg{})
		name := fmt.Sprintf("%dx%d", w, h)
		t.Run("watch_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "tab")
		t.Run("requests_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "down", "enter")
		t.Run("waterfall_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
	}
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
		"bucket estimate (±bucket)", "≈200 ms (100ms–250ms)", "canary (client-measured)",
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
