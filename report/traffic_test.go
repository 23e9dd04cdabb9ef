package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// watchEvents are ten seconds of a watch with a canary: the server's
// histograms (with buckets), four users' requests from its spans, one
// canary request.
func watchEvents(t0 time.Time) []event.Event {
	var evs []event.Event
	bounds := []float64{0.1, 0.25, 1}
	for i := range 10 {
		evs = append(evs, event.NewServer(&event.ServerSample{Time: t0.Add(time.Duration(i) * time.Second), Source: "m", Dialect: "vllm",
			Interval: time.Second, Waiting: new(2.0), KVCache: new(0.25), Preemptions: new(1.0), PrefixQueries: new(100.0), PrefixHits: new(40.0),
			GenTokensPerSec: new(300.0), PromptTokensPerSec: new(900.0),
			Stages: map[string]event.HistStat{
				"queue":   {Count: 10, Mean: 100 * time.Millisecond},
				"prefill": {Count: 10, Mean: 50 * time.Millisecond},
				"decode":  {Count: 10, Mean: 800 * time.Millisecond},
				"e2e":     {Count: 10, Mean: time.Second},
				"ttft":    {Count: 10, Mean: 180 * time.Millisecond, Bounds: bounds, Counts: []float64{0, 10, 0, 0}},
			}}))
	}
	for i := range 4 {
		end := t0.Add(time.Duration(2+i) * time.Second)
		evs = append(evs, event.NewRequest(&event.Request{ID: fmt.Sprintf("cmpl-user-%d", i), Intended: end.Add(-time.Second), Start: end.Add(-time.Second),
			Outcome: event.OutcomeOK, TTFT: 150 * time.Millisecond, E2E: time.Second, Flags: []event.Flag{event.FlagServerReported},
			Server: &event.ServerTiming{Source: event.SourceOTLP, Stages: map[event.Stage]time.Duration{
				event.StageQueue: 100 * time.Millisecond, event.StagePrefill: 50 * time.Millisecond, event.StageDecode: 800 * time.Millisecond}}}))
	}
	evs = append(evs, event.NewRequest(&event.Request{ID: "c1", Intended: t0.Add(3 * time.Second), Start: t0.Add(3 * time.Second), Outcome: event.OutcomeOK,
		TTFT: 200 * time.Millisecond, E2E: 400 * time.Millisecond, OutputTokens: 2, Flags: []event.Flag{event.FlagCanary},
		Chunks: []event.Chunk{{At: 200 * time.Millisecond, Tokens: 1}, {At: 400 * time.Millisecond, Tokens: 1}}}))
	return byTime(evs)
}

// A watch's report, in every format, has the traffic section: shares,
// quantiles marked as bucket estimates with their buckets, rates, KV
// cache, preemptions, prefix hits, and the users' requests from the spans
// apart from the canary's.
func TestReportOfAWatch(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	header := &event.Session{Time: t0, Target: "http://gpu-7:8000", Server: "vllm", Load: event.Load{Mode: event.LoadCanary, Rate: 0.5}}
	rec, err := Load(writeRecording(t, t.TempDir(), "watch.lsr", header, watchEvents(t0), 0))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Your users' traffic (server-reported, the server's vllm metrics", "Where your users' time went",
		"queue", "10.0%", "decode", "80.0%", "Your users' quantiles (bucket estimates)",
		"≈180 ms (100ms–250ms)", "resolution", "25.0%", "40.0% (counters)",
		"Your users' requests from the server's spans (4 requests; ms)", "never the canary's",
		"queue 10% prefill 5% decode 80% rest 5% of e2e", "The canary's requests (latscope's own)",
	}
	for _, f := range []Format{Markdown, HTML} {
		var b bytes.Buffer
		if err := Write(&b, f, rec); err != nil {
			t.Fatal(err)
		}
		text := b.String()
		if f == HTML {
			text = strings.NewReplacer("&#39;", "'", "&gt;", ">").Replace(text)
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s report lacks %q", f, w)
			}
		}
	}
	var b bytes.Buffer
	if err := Write(&b, JSON, rec); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Traffic struct {
			Seen      bool                       `json:"seen"`
			Quantiles map[string]json.RawMessage `json:"quantiles"`
			Spans     struct {
				Requests int64 `json:"requests"`
			} `json:"spans"`
		} `json:"traffic"`
		Requests struct {
			Sent int64 `json:"sent"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Traffic.Seen || got.Traffic.Quantiles["ttft"] == nil || got.Traffic.Spans.Requests != 4 || got.Requests.Sent != 1 {
		t.Errorf("json report: %+v", got)
	}
}
