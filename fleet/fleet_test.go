package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// agentEvents is one agent's session: its header, then n successful
// requests 100 ms apart on its own clock (true time + skew), the i-th
// taking ttft + i ms to its first token.
func agentEvents(name string, n int, ttft, skew time.Duration) []event.Event {
	at := t0.Add(skew)
	evs := []event.Event{event.NewSession(&event.Session{Time: at, Latscope: "test", Name: name, Target: "http://" + name,
		Load: event.Load{Mode: "closed", Concurrency: 2, SLO: "ttft.p99<2s"}})}
	for i := range n {
		start := at.Add(time.Duration(i) * 100 * time.Millisecond)
		d := ttft + time.Duration(i)*time.Millisecond
		evs = append(evs, event.NewRequest(&event.Request{ID: fmt.Sprintf("%s-%d", name, i), Intended: start, Start: start,
			Outcome: event.OutcomeOK, TTFT: d, E2E: d + 10*time.Millisecond, OutputTokens: 1}))
	}
	return evs
}

// The fleet merges the agents' distributions exactly: its request count is
// the sum of theirs and its TTFT percentiles are those of the union of
// their requests (here far from the mean of their medians), and its
// snapshot (the dashboard) and its summary (--json, the final table) give
// the same numbers.
func TestFleetMergesTheAgentsExactly(t *testing.T) {
	t.Parallel()
	agents := []struct {
		name string
		n    int
		ttft time.Duration
	}{{"east", 50, 100 * time.Millisecond}, {"west", 200, 400 * time.Millisecond}, {"north", 20, 900 * time.Millisecond}}
	f := New(Config{})
	union := aggregate.New(aggregate.Config{})
	var meanP50 float64
	for _, a := range agents {
		own := aggregate.New(aggregate.Config{})
		for _, ev := range agentEvents(a.name, a.n, a.ttft, 0) {
			f.merged.Add(ev, 0)
			own.Add(ev)
			if ev.Request != nil {
				union.Add(ev)
			}
		}
		meanP50 += own.Summary().TTFT.P50 / float64(len(agents))
	}
	snap, _ := f.Snapshot()
	run := snap.Windows[aggregate.WinRun]
	sum := f.Summary()
	want := union.Summary().TTFT
	if run.Sent != 270 || run.TTFT.Count != 270 || sum.Requests.Sent != 270 {
		t.Fatalf("the fleet counts %d requests (%d sent, summary %d), want the agents' 270", run.TTFT.Count, run.Sent, sum.Requests.Sent)
	}
	if run.TTFT.P50 != want.P50 || run.TTFT.P99 != want.P99 || sum.TTFT.P50 != want.P50 || sum.TTFT.P99 != want.P99 {
		t.Fatalf("fleet TTFT p50/p99: snapshot %.3f/%.3f, summary %.3f/%.3f; the union's %.3f/%.3f ms",
			run.TTFT.P50, run.TTFT.P99, sum.TTFT.P50, sum.TTFT.P99, want.P50, want.P99)
	}
	// The union's median is a west request (over 400 ms); the mean of the
	// agents' medians is about 480 ms.
	if run.TTFT.P50 < 400 || run.TTFT.P50 > 500 || run.TTFT.P50 == meanP50 {
		t.Fatalf("fleet p50 %.1f ms (mean of the agents' p50s %.1f)", run.TTFT.P50, meanP50)
	}
	h := snap.Session
	if h == nil || h.Name != Name || h.Target != "" || h.Load.Mode != Name || h.Load.SLO != "ttft.p99<2s" {
		t.Fatalf("fleet session %+v: want the fleet's, with the agents' objectives and no one agent's target or load", h)
	}
	if sum.Requests.Good == nil || *sum.Requests.Good != 270 || run.Good != 270 {
		t.Errorf("the fleet dropped the agents' objectives: goodput %v (snapshot %d), want all 270 within ttft.p99<2s", sum.Requests.Good, run.Good)
	}
}

// skewedSource is an agent's source whose clock offset changes between
// its two connections, as attach's client re-estimates it at each one.
type skewedSource struct {
	first, second []event.Event
	offset        time.Duration // what the client's estimate says now
	set           func(time.Duration)
	secondOffset  time.Duration
}

func (s *skewedSource) Run(_ context.Context, emit func(event.Event)) error {
	for _, ev := range s.first {
		emit(ev)
	}
	s.set(s.secondOffset) // the reconnection's estimate, before its events
	for _, ev := range s.second {
		emit(ev)
	}
	return nil
}

// Each agent's events reach the fleet moved by its clock offset as the
// client estimated it for the connection they came on, while the agent's
// own pipeline gets them unchanged: agents at +250 ms, 0 and -100 ms whose
// requests went out at the same true times line up on the fleet's
// timeline, even when one's clock was stepped between two connections.
func TestFleetAlignsEachAgentByItsClock(t *testing.T) {
	t.Parallel()
	f := New(Config{SampleKeep: 50})
	run := func(src pipeline.Source, offset func() time.Duration) []event.Event {
		var got []event.Event
		if err := f.Source(src, offset).Run(context.Background(), func(ev event.Event) { got = append(got, ev) }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, skew := range []time.Duration{250 * time.Millisecond, 0, -100 * time.Millisecond} {
		evs := agentEvents(fmt.Sprint("skew", skew), 10, 50*time.Millisecond, skew)
		off := skew
		got := run(pipeline.SourceFunc(func(_ context.Context, emit func(event.Event)) error {
			for _, ev := range evs {
				emit(ev)
			}
			return nil
		}), func() time.Duration { return off })
		if len(got) != len(evs) || got[1].Request != evs[1].Request {
			t.Fatalf("skew %v: the agent's pipeline got %d events, not its own %d unchanged", skew, len(got), len(evs))
		}
	}
	// The fourth agent's clock is +40 ms on its first connection and was
	// stepped to -30 ms before its second.
	all := agentEvents("stepped", 10, 50*time.Millisecond, 40*time.Millisecond)
	second := agentEvents("stepped", 10, 50*time.Millisecond, -30*time.Millisecond)
	src := &skewedSource{first: all[:6], second: second[6:], offset: 40 * time.Millisecond, secondOffset: -30 * time.Millisecond}
	src.set = func(d time.Duration) { src.offset = d }
	run(src, func() time.Duration { return src.offset })

	snap, _ := f.Snapshot()
	sampled := snap.Sample.Latest // the fleet's request sample: every request it took
	if len(sampled) != 40 {
		t.Fatalf("the fleet took %d requests, want 40", len(sampled))
	}
	for _, r := range sampled {
		i := int(r.ID[len(r.ID)-1] - '0') // the request's index, 0 to 9
		if want := t0.Add(time.Duration(i) * 100 * time.Millisecond); !r.Start.Equal(want) || !r.Intended.Equal(want) {
			t.Errorf("request %s starts at %v on the fleet's timeline, want the true %v", r.ID, r.Start.Sub(t0), want.Sub(t0))
		}
	}
	if !snap.Session.Time.Equal(t0) {
		t.Errorf("the fleet starts at %v, want the true start", snap.Session.Time.Sub(t0))
	}
	if !snap.Start.Equal(t0) {
		t.Errorf("the fleet's requests start at %v, want the true start", snap.Start.Sub(t0))
	}
}

// rawAgent is an agent whose probe left its judgement to the aggregator
// (event.ProbeRawV1): three streams of its pause together 200 ms into its
// run, on its own clock (true time + skew).
func rawAgent(name string, skew time.Duration) []event.Event {
	at := t0.Add(skew)
	evs := []event.Event{event.NewProbe(&event.ProbeSample{Time: at, Raw: event.ProbeRawV1})}
	for i := range 3 {
		start := at.Add(time.Duration(3*i) * time.Millisecond)
		r := &event.Request{ID: fmt.Sprintf("%s-%d", name, i), Start: start, Intended: start, Outcome: event.OutcomeOK}
		for ms := 5; ms <= 465; ms += 10 {
			if ms > 195 && ms < 265 {
				continue // the pause
			}
			r.Chunks = append(r.Chunks, event.Chunk{At: time.Duration(ms) * time.Millisecond, Tokens: 1})
		}
		r.TTFT, r.E2E, r.OutputTokens = r.Chunks[0].At, r.Chunks[len(r.Chunks)-1].At, len(r.Chunks)
		evs = append(evs, event.NewRequest(r))
	}
	return append(evs, event.NewProbe(&event.ProbeSample{Time: at.Add(time.Second), Raw: event.ProbeRawV1}))
}

// Each agent's raw stream is judged on its own, as its own view judges it:
// two agents whose streams pause at the same true time are two stall
// markers of three streams each in the fleet, not one of six.
func TestFleetJudgesEachAgentOnItsOwn(t *testing.T) {
	t.Parallel()
	f := New(Config{})
	for _, a := range []struct {
		name string
		skew time.Duration
	}{{"east", 250 * time.Millisecond}, {"west", 0}} {
		evs := rawAgent(a.name, a.skew)
		src := pipeline.SourceFunc(func(_ context.Context, emit func(event.Event)) error {
			for _, ev := range evs {
				emit(ev)
			}
			return nil
		})
		own := aggregate.New(aggregate.Config{})
		if err := f.Source(src, func() time.Duration { return a.skew }).Run(context.Background(), own.Add); err != nil {
			t.Fatal(err)
		}
		if n := own.Final().Markers.Counts[event.MarkerStall]; n != 1 {
			t.Fatalf("%s's own view: %d stall markers, want 1", a.name, n)
		}
	}
	snap, _ := f.Snapshot()
	var stalls []event.Marker
	for _, m := range snap.Markers.Recent {
		if m.Kind == event.MarkerStall {
			stalls = append(stalls, m)
		}
	}
	if len(stalls) != 2 {
		t.Fatalf("fleet stall markers %+v: want one per agent", stalls)
	}
	for _, m := range stalls {
		if len(m.RequestIDs) != 3 || !m.Time.After(t0.Add(200*time.Millisecond)) || m.Time.After(t0.Add(210*time.Millisecond)) {
			t.Errorf("fleet marker %q at %v of %v: want 3 streams, on the fleet's (true) timeline at about 200 ms", m.Message, m.Time.Sub(t0), m.RequestIDs)
		}
	}
}
