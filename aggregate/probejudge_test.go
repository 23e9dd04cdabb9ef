package aggregate

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// readsStream is a successful request that started at start and read its
// content at the given offsets (ms after start), one token each; batch
// marks reads that brought two events at once.
func readsStream(id string, start time.Time, atMS []int, batch map[int]bool) *event.Request {
	r := &event.Request{ID: id, Start: start, Intended: start, Outcome: event.OutcomeOK, TTFT: time.Duration(atMS[0]) * time.Millisecond}
	for _, ms := range atMS {
		c := event.Chunk{At: time.Duration(ms) * time.Millisecond, Tokens: 1, Batch: 1}
		if batch[ms] {
			c.Batch = 2
		}
		r.Chunks = append(r.Chunks, c)
	}
	r.OutputTokens = len(r.Chunks)
	r.E2E = r.Chunks[len(r.Chunks)-1].At
	return r
}

// pausing is a stream reading every 10 ms from 5 ms after start, with no
// read between 195 and 265 ms: three of them, started 3 ms apart, pause
// together over [201, 265] ms.
func pausing(id string, start time.Time) *event.Request {
	var at []int
	for ms := 5; ms <= 195; ms += 10 {
		at = append(at, ms)
	}
	for ms := 265; ms <= 465; ms += 10 {
		at = append(at, ms)
	}
	return readsStream(id, start, at, nil)
}

// rawStream is a raw probe's stream: a sample, three streams that paused
// together at t0+~200 ms, the samples after it (the second says the
// probe's goroutines ran late over the pause when starved is set), and
// extra requests after the three.
func rawStream(t0 time.Time, starved bool, extra ...*event.Request) []event.Event {
	ids := []string{"a", "b", "c"}
	first := &event.ProbeSample{Time: t0, MaxInFlight: 8, CPUPercent: 10, Cores: 2, Raw: event.ProbeRawV1}
	for i, id := range ids {
		first.Sent = append(first.Sent, event.Sent{ID: id, At: t0.Add(time.Duration(3*i) * time.Millisecond)})
	}
	evs := []event.Event{event.NewProbe(first)}
	for i, id := range ids {
		evs = append(evs, event.NewRequest(pausing(id, t0.Add(time.Duration(3*i)*time.Millisecond))))
	}
	for _, r := range extra {
		evs = append(evs, event.NewRequest(r))
	}
	second := &event.ProbeSample{Time: t0.Add(time.Second), MaxInFlight: 8, CPUPercent: 10, Cores: 2, Raw: event.ProbeRawV1}
	if starved {
		second.Late = []event.Stretch{{From: t0.Add(195 * time.Millisecond), To: t0.Add(270 * time.Millisecond)}}
	}
	evs = append(evs, event.NewProbe(second))
	for s := 2; s <= 8; s++ {
		evs = append(evs, event.NewProbe(&event.ProbeSample{Time: t0.Add(time.Duration(s) * time.Second), MaxInFlight: 8, CPUPercent: 10, Cores: 2, Raw: event.ProbeRawV1}))
	}
	return evs
}

func stallMarkers(s Snapshot) []event.Marker {
	var out []event.Marker
	for _, m := range s.Markers.Recent {
		if m.Kind == event.MarkerStall {
			out = append(out, m)
		}
	}
	return out
}

// The aggregator finds the stall in a raw stream and names its cause from
// the probe's own late stretch; the snapshot's probe sample is judged.
func TestAggregatorDerivesStallsFromRawSamples(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	for _, ev := range rawStream(base(), true) {
		a.Add(ev)
	}
	s := a.Final()
	ms := stallMarkers(s)
	if len(ms) != 1 || ms[0].Cause != event.StallProbeStarved || ms[0].Source != "stall-detector" || len(ms[0].RequestIDs) != 3 {
		t.Fatalf("stall markers %+v: want one probe-starved pause of the three streams", ms)
	}
	if s.Verdict.StarvedStalls != 1 {
		t.Errorf("verdict %+v: want the starved pause in it", s.Verdict)
	}
	if p := s.Probe; p == nil || p.Raw != 0 || p.Sent != nil || p.Late != nil || p.SendLags != nil {
		t.Errorf("snapshot's probe sample %+v: want it judged, without its raw evidence", p)
	}
	// Without the late stretch, nothing shows why.
	b := New(Config{})
	for _, ev := range rawStream(base(), false) {
		b.Add(ev)
	}
	if ms := stallMarkers(b.Final()); len(ms) != 1 || ms[0].Cause == event.StallProbeStarved {
		t.Fatalf("stall markers %+v: want one pause, not the probe's", ms)
	}
}

// A live stream (times with monotonic readings), its recording (JSON:
// wall-clock times only) and its events judged first by one ProbeJudge
// and handed on (the fleet's and the sweep's way) derive the same stall
// markers.
func TestStallsLiveReplayedAndHandedOnAgree(t *testing.T) {
	t.Parallel()
	live := rawStream(time.Now(), true) // time.Now carries a monotonic reading
	derive := func(evs []event.Event) []event.Marker {
		a := New(Config{})
		for _, ev := range evs {
			a.Add(ev)
		}
		return stallMarkers(a.Final())
	}
	replayed := throughCodec(t, live)
	var handed []event.Event
	j := NewProbeJudge()
	for _, ev := range live {
		ev, ms := j.Add(ev)
		handed = append(handed, ev)
		for i := range ms {
			handed = append(handed, event.NewMarker(&ms[i]))
		}
	}
	for _, m := range j.Flush() {
		handed = append(handed, event.NewMarker(&m))
	}
	want := derive(live)
	if len(want) != 1 {
		t.Fatalf("live: %d stall markers, want 1", len(want))
	}
	for name, got := range map[string][]event.Marker{"replayed": derive(replayed), "handed on": derive(handed)} {
		if len(got) != len(want) {
			t.Fatalf("%s: %d stall markers, live %d", name, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if !g.Time.Equal(w.Time) || g.Message != w.Message || g.Cause != w.Cause || g.Duration != w.Duration ||
				!reflect.DeepEqual(g.Values, w.Values) || !reflect.DeepEqual(g.RequestIDs, w.RequestIDs) {
				t.Errorf("%s: marker %+v, live %+v", name, g, w)
			}
		}
	}
}

// A recording made before the probe left its judgement to the aggregator
// carries the probe's own stall marker and judged samples: the aggregator
// keeps exactly those and derives nothing again (no pause counted twice).
func TestOldRecordingKeepsItsOwnMarkers(t *testing.T) {
	t.Parallel()
	t0 := base()
	a := New(Config{})
	a.Add(event.NewProbe(&event.ProbeSample{Time: t0, InFlight: 3, CPUPercent: 10, SchedLagP99: 30 * time.Millisecond, LagSamples: 40,
		Limited: true, Reason: "probe is the bottleneck: open-loop sends are late"}))
	for i, id := range []string{"a", "b", "c"} {
		a.Add(event.NewRequest(pausing(id, t0.Add(time.Duration(3*i)*time.Millisecond))))
	}
	a.Add(event.NewMarker(&event.Marker{Time: t0.Add(201 * time.Millisecond), Kind: event.MarkerStall, Source: "stall-detector",
		Cause: event.StallFrontEndBlock, Duration: 64 * time.Millisecond, RequestIDs: []string{"a", "b", "c"},
		Message: "front-end block: 3 streams paused together for 64.0 ms", Values: map[string]float64{"streams": 3, "pauses": 1, "gap_ms": 64}}))
	for s := 1; s <= 8; s++ {
		a.Add(event.NewProbe(&event.ProbeSample{Time: t0.Add(time.Duration(s) * time.Second), InFlight: 3, CPUPercent: 10}))
	}
	s := a.Final()
	if got := s.Markers.StallCauses; len(got) != 1 || got[event.StallFrontEndBlock] != 1 {
		t.Fatalf("stall causes %v: want the recording's one front-end block alone", got)
	}
	if s.Verdict.LimitedSamples != 1 {
		t.Errorf("verdict %+v: want the recorded sample's own word that it was the limit", s.Verdict)
	}
}

// The probe's samples say how late its open-loop sends were; the judged
// samples carry the quantiles, say when the probe was the limit, and a
// probe_limit marker says so once per cooldown.
func TestJudgeDerivesTheProbesLimit(t *testing.T) {
	t.Parallel()
	t0 := base()
	j := NewProbeJudge()
	var limits []event.Marker
	var last *event.ProbeSample
	for s := range 15 {
		p := &event.ProbeSample{Time: t0.Add(time.Duration(s) * time.Second), CPUPercent: 20, Cores: 2, Raw: event.ProbeRawV1}
		for i := range 30 {
			p.SendLags = append(p.SendLags, event.SendLag{At: -time.Duration(i) * 30 * time.Millisecond, Lag: 40 * time.Millisecond})
		}
		ev, ms := j.Add(event.NewProbe(p))
		last = ev.Probe
		for _, m := range ms {
			if m.Kind == event.MarkerProbeLimit {
				limits = append(limits, m)
			}
		}
	}
	if !last.Limited || last.SchedLagP99 != 40*time.Millisecond || last.LagSamples < 20 || last.Raw != 0 || last.SendLags != nil {
		t.Fatalf("judged sample %+v: want limited, p99 40 ms, its raw lags gone", last)
	}
	// 15 s of samples, a marker at most every 10 s.
	if len(limits) != 2 || limits[0].Values["sched_lag_p99_ms"] != 40 {
		t.Fatalf("probe_limit markers %+v: want two, 10 s apart", limits)
	}
}

// A Nagle suspicion resting on a gap the other streams paused in too is
// taken back: the aggregator neither counts the flag nor lists it, and the
// record itself is not changed.
func TestNagleSuspicionInASharedPauseIsTakenBack(t *testing.T) {
	t.Parallel()
	t0 := base()
	// Three holds of 40 ms, each ending in a read of two events: the
	// signature, but the one over [210, 250] ms is inside the pause the
	// three other streams shared.
	d := readsStream("d", t0, []int{130, 170, 180, 210, 250, 260, 300, 340}, map[int]bool{170: true, 250: true, 340: true})
	d.Flags = []event.Flag{event.FlagNagleSuspect}
	a := New(Config{})
	for _, ev := range rawStream(t0, false, d) {
		a.Add(ev)
	}
	s := a.Final()
	if n := s.Requests.Flags[event.FlagNagleSuspect]; n != 0 {
		t.Errorf("%d requests counted Nagle suspects, want none", n)
	}
	for _, r := range s.Sample.Latest {
		if r.ID == "d" && r.HasFlag(event.FlagNagleSuspect) {
			t.Error("the sample lists d still flagged")
		}
	}
	if !d.HasFlag(event.FlagNagleSuspect) {
		t.Error("the record itself was changed")
	}
	// Outside a shared pause, the suspicion stands.
	lone := readsStream("d", t0.Add(time.Minute), []int{130, 170, 180, 210, 250, 260, 300, 340}, map[int]bool{170: true, 250: true, 340: true})
	lone.Flags = []event.Flag{event.FlagNagleSuspect}
	b := New(Config{})
	b.Add(event.NewProbe(&event.ProbeSample{Time: t0, Raw: event.ProbeRawV1}))
	b.Add(event.NewRequest(lone))
	if n := b.Final().Requests.Flags[event.FlagNagleSuspect]; n != 1 {
		t.Errorf("a lone suspect counted %d times, want 1", n)
	}
}

// Before a probe says its stream is raw, and in a stream without one, the
// judge hands everything on as it came.
func TestJudgePassesStreamsItNeedNotJudge(t *testing.T) {
	t.Parallel()
	t0 := base()
	j := NewProbeJudge()
	r := okReq(t0, 10*time.Millisecond, time.Millisecond, 4)
	r.Flags = []event.Flag{event.FlagNagleSuspect}
	for _, ev := range []event.Event{
		event.NewRequest(r),
		event.NewMarker(&event.Marker{Time: t0, Kind: event.MarkerStall, Source: "stall-detector", Cause: event.StallUnexplained}),
		event.NewProbe(&event.ProbeSample{Time: t0, Limited: true, Reason: "r"}),
	} {
		got, ms := j.Add(ev)
		if !reflect.DeepEqual(got, ev) || len(ms) != 0 {
			t.Fatalf("%s: judged %+v with %d markers, want it unchanged", ev.Kind, got, len(ms))
		}
	}
	if ms := j.Flush(); len(ms) != 0 {
		t.Fatalf("flush of an unjudged stream: %v", ms)
	}
}

// The session's detected server decides what counts as evidence of a
// stall's cause: another request's first token ending the streams' pause
// is prefill interference on vLLM, and only what was seen on a plain
// OpenAI-compatible server (a fake that sleeps prefills nothing).
func TestStallCauseFollowsTheDetectedServer(t *testing.T) {
	t.Parallel()
	t0 := base()
	closer := func() *event.Request {
		r := readsStream("new", t0.Add(150*time.Millisecond), []int{118, 128, 138}, nil)
		r.Stages = []event.StageTiming{
			{Stage: event.StageWrite, Duration: time.Millisecond, Provenance: event.Measured},
			{Stage: event.StageWaitHeaders, Duration: time.Millisecond, Provenance: event.Measured},
			{Stage: event.StageFirstToken, Duration: 116 * time.Millisecond, Provenance: event.Measured},
		}
		return r
	}
	for _, tc := range []struct {
		server string
		want   event.StallCause
		said   string
	}{
		{"vllm", event.StallPrefillInterference, "request new's first token came"},
		{"openai", event.StallUnexplained, "the server (openai) is not known to prefill in the steps that decode"},
		{"", event.StallUnexplained, "a server of unknown kind is not known to prefill"},
	} {
		a := New(Config{})
		a.Add(event.NewSession(&event.Session{Time: t0, Server: tc.server}))
		for _, ev := range rawStream(t0, false, closer()) {
			a.Add(ev)
		}
		ms := stallMarkers(a.Final())
		if len(ms) != 1 || ms[0].Cause != tc.want || !strings.Contains(ms[0].Message, tc.said) {
			t.Errorf("server %q: stall markers %+v, want one %s saying %q", tc.server, ms, tc.want, tc.said)
		}
	}
}

// throughCodec is evs encoded and decoded again, as a recording or an
// agent's feed gives them back.
func throughCodec(t *testing.T, evs []event.Event) []event.Event {
	t.Helper()
	out := make([]event.Event, 0, len(evs))
	for _, ev := range evs {
		b, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		back, err := event.Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, back)
	}
	return out
}
