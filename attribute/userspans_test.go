package attribute

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/event"
)

// userSpanEvent is a vLLM span of request id: 40 ms TTFT (5 front end, 30
// queue, 5 prefill), 100 ms of decode, 150 ms end to end, ended at end.
func userSpanEvent(id string, end time.Time) event.Event {
	return event.NewSpan(&event.Span{Time: end, RequestID: id, End: end, Timing: event.ServerTiming{
		Source: event.SourceOTLP, PromptTokens: 12, OutputTokens: 9,
		Stages: map[event.Stage]time.Duration{
			event.StageServerTTFT: 40 * ms, event.StageQueue: 30 * ms, event.StagePrefill: 5 * ms,
			event.StageDecode: 100 * ms, event.StageServerE2E: 150 * ms,
		},
	}})
}

// runUsers runs an attributor with cfg inside a synctest bubble and hands
// its input and output to body.
func runUsers(t *testing.T, cfg AttributorConfig, body func(in chan<- event.Event, out <-chan event.Event)) {
	synctest.Test(t, func(t *testing.T) {
		in, out := make(chan event.Event), make(chan event.Event, 64)
		a := NewAttributor(cfg)
		done := make(chan struct{})
		go func() { defer close(done); a.Run(context.Background(), in, out) }()
		body(in, out)
		close(in)
		for range out {
		}
		<-done
	})
}

// pending returns the events waiting on out once the bubble is idle.
func pending(out <-chan event.Event) []event.Event {
	synctest.Wait()
	var evs []event.Event
	for {
		select {
		case ev := <-out:
			evs = append(evs, ev)
		default:
			return evs
		}
	}
}

// With no load of latscope's own, every span is a user's request at once:
// flagged server-reported, its times the span's, its TTFT split into the
// front end, queue and prefill.
func TestUserSpansAtOnce(t *testing.T) {
	runUsers(t, AttributorConfig{JoinSpans: true, UserSpans: true}, func(in chan<- event.Event, out <-chan event.Event) {
		end := time.Now()
		in <- userSpanEvent("cmpl-user-1", end)
		got := pending(out)
		if len(got) != 1 || got[0].Request == nil {
			t.Fatalf("want one request out, got %+v", got)
		}
		r := got[0].Request
		if !r.HasFlag(event.FlagServerReported) || !r.OK() || r.ID != "cmpl-user-1" {
			t.Fatalf("record: %+v", r)
		}
		if r.TTFT != 40*ms || r.E2E != 150*ms || !r.EndedAt().Equal(end.Round(0)) || r.PromptTokens != 12 || r.OutputTokens != 9 {
			t.Errorf("times: ttft %v e2e %v end %v (want %v)", r.TTFT, r.E2E, r.EndedAt(), end)
		}
		var sum time.Duration
		want := map[event.Stage]time.Duration{event.StageUnattributed: 5 * ms, event.StageQueue: 30 * ms, event.StagePrefill: 5 * ms}
		for _, s := range r.Breakdown {
			sum += s.Duration
			if s.Provenance != event.ServerReported || want[s.Stage] != s.Duration {
				t.Errorf("breakdown stage %+v", s)
			}
		}
		if sum != r.TTFT || len(r.Breakdown) != 3 {
			t.Errorf("breakdown %+v does not add up to the TTFT %v", r.Breakdown, r.TTFT)
		}
	})
}

// Beside a canary, a span waits for a request of latscope's to claim it:
// the canary's own span joins the canary's request (even when the span
// came first) and never becomes a user's; another's leaves after the wait.
func TestUserSpansBesideCanary(t *testing.T) {
	cfg := AttributorConfig{JoinSpans: true, JoinWait: time.Second, UserSpans: true, UserSpanWait: time.Second}
	runUsers(t, cfg, func(in chan<- event.Event, out <-chan event.Event) {
		in <- userSpanEvent("chatcmpl-canary-1", time.Now()) // before its request ends
		in <- userSpanEvent("cmpl-user-7", time.Now())
		time.Sleep(100 * time.Millisecond)
		in <- requestEvent("canary-1")
		got := pending(out)
		if len(got) != 1 || got[0].Request == nil || got[0].Request.ID != "canary-1" || got[0].Request.HasFlag(event.FlagServerReported) {
			t.Fatalf("want the canary's request alone, joined: %+v", got)
		}
		if s := got[0].Request.Server; s == nil || s.Source != event.SourceOTLP {
			t.Errorf("the canary's request did not take its span: %+v", s)
		}
		time.Sleep(time.Second)
		got = pending(out)
		if len(got) != 1 || got[0].Request == nil || got[0].Request.ID != "cmpl-user-7" || !got[0].Request.HasFlag(event.FlagServerReported) {
			t.Fatalf("want the user's span as its record after the wait, got %+v", got)
		}
	})
}

// A span with no end-to-end time or stage makes no record; one whose
// stages do not fit its TTFT gets no breakdown; a server clock far ahead
// is not trusted.
func TestUserRecordEdges(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if r := userRecord(&event.Span{Time: now, TraceID: "ab", Timing: event.ServerTiming{Stages: map[event.Stage]time.Duration{}}}); r != nil {
		t.Errorf("empty span made %+v", r)
	}
	sp := &event.Span{Time: now, TraceID: "AB", End: now.Add(time.Hour), Timing: event.ServerTiming{Source: event.SourceOTLPTGI,
		Stages: map[event.Stage]time.Duration{event.StageQueue: 10 * ms, event.StageInference: 90 * ms, event.StageServerE2E: 120 * ms}}}
	r := userRecord(sp)
	if r == nil || r.ID != "trace-AB" || r.TraceID != "ab" || len(r.Breakdown) != 0 || !r.EndedAt().Equal(now) || r.E2E != 120*ms {
		t.Errorf("TGI-like span: %+v", r)
	}
	sp.Timing.Stages[event.StageServerTTFT] = 5 * ms // shorter than its queue
	sp.Timing.Stages[event.StagePrefill] = ms
	if r := userRecord(sp); len(r.Breakdown) != 0 {
		t.Errorf("stages longer than the TTFT were split: %+v", r.Breakdown)
	}
}

// Beside a canary, a canary request released without its span (the join
// wait passed) keeps its span from becoming a user's when it comes late.
func TestUserSpansLateCanarySpan(t *testing.T) {
	cfg := AttributorConfig{JoinSpans: true, JoinWait: time.Second, UserSpans: true, UserSpanWait: time.Second}
	runUsers(t, cfg, func(in chan<- event.Event, out <-chan event.Event) {
		in <- requestEvent("canary-2")
		time.Sleep(1500 * time.Millisecond)
		var released bool
		for _, ev := range pending(out) { // and the attributor's marker of it
			released = released || ev.Request != nil && ev.Request.ID == "canary-2"
		}
		if !released {
			t.Error("the canary's request was not released after the wait")
			return
		}
		in <- userSpanEvent("chatcmpl-canary-2", time.Now())
		time.Sleep(2 * time.Second)
		for _, ev := range pending(out) {
			if ev.Request != nil {
				t.Errorf("the canary's late span went out as %+v", ev.Request)
			}
		}
	})
}
