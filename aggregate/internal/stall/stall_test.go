package stall

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

var stallT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// stallStreamRec makes a record whose stream starts at start (offset from
// stallT0), sends n chunks every itl from 5 ms later, and pauses for pause
// once it reaches pauseAt (also an offset from stallT0; no pause when pause
// is 0). It was written 1 ms after its start and had its headers at 2 ms.
func stallStreamRec(id string, start time.Duration, n int, itl, pauseAt, pause time.Duration) *event.Request {
	r := &event.Request{ID: id, Start: stallT0.Add(start), Intended: stallT0.Add(start), Outcome: event.OutcomeOK,
		Stages: clientStages(time.Millisecond, 2*time.Millisecond, 5*time.Millisecond)}
	at := 5 * time.Millisecond
	paused := false
	for range n {
		r.Chunks = append(r.Chunks, event.Chunk{At: at, Tokens: 1})
		at += itl
		if !paused && pause > 0 && start+at >= pauseAt {
			at += pause
			paused = true
		}
	}
	return r
}

// msec is a millisecond, for the cases' tables.
const msec = time.Millisecond

// detectorCases are TestDetector's cases.
var detectorCases = []struct {
	name        string
	recs        []*event.Request
	wantMarkers int
	wantStreams int
}{
	{
		name: "three streams pause together",
		recs: []*event.Request{
			stallStreamRec("a", 0, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("b", 3*msec, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("c", 6*msec, 40, 10*msec, 200*msec, 60*msec),
		},
		wantMarkers: 1, wantStreams: 3,
	},
	{
		name: "five streams, one steady",
		recs: []*event.Request{
			stallStreamRec("a", 0, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("b", 1*msec, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("c", 2*msec, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("d", 3*msec, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("e", 4*msec, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("steady", 5*msec, 40, 10*msec, 0, 0),
		},
		wantMarkers: 1, wantStreams: 5,
	},
	{
		name: "two streams of three are not enough",
		recs: []*event.Request{
			stallStreamRec("a", 0, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("b", 3*msec, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("steady", 5*msec, 40, 10*msec, 0, 0),
		},
	},
	{
		// Long prompts in prefill can leave two streams decoding:
		// both pausing together is the evidence then.
		name: "two streams that are all that stream",
		recs: []*event.Request{
			stallStreamRec("a", 0, 40, 10*msec, 200*msec, 60*msec),
			stallStreamRec("b", 3*msec, 40, 10*msec, 200*msec, 60*msec),
		},
		wantMarkers: 1, wantStreams: 2,
	},
	{
		name: "two streams at 2x their normal gap, all that stream",
		recs: []*event.Request{
			stallStreamRec("a", 0, 40, 25*msec, 200*msec, 30*msec),
			stallStreamRec("b", 3*msec, 40, 25*msec, 200*msec, 30*msec),
		},
		wantMarkers: 1, wantStreams: 2,
	},
	{
		name: "one stream alone is no stall",
		recs: []*event.Request{
			stallStreamRec("a", 0, 40, 10*msec, 200*msec, 60*msec),
		},
	},
	{
		name: "pauses under 10 msec longer than the normal gap",
		recs: []*event.Request{
			stallStreamRec("a", 0, 100, 2*msec, 100*msec, 7*msec),
			stallStreamRec("b", 0, 100, 2*msec, 100*msec, 7*msec),
			stallStreamRec("c", 0, 100, 2*msec, 100*msec, 7*msec),
		},
	},
	{
		name: "a short pause shared by every stream",
		recs: []*event.Request{
			stallStreamRec("a", 0, 60, 10*msec, 200*msec, 15*msec),
			stallStreamRec("b", 1*msec, 60, 10*msec, 200*msec, 15*msec),
			stallStreamRec("c", 2*msec, 60, 10*msec, 200*msec, 15*msec),
			stallStreamRec("d", 3*msec, 60, 10*msec, 200*msec, 15*msec),
		},
		wantMarkers: 1, wantStreams: 4,
	},
	{
		name: "a short pause in three of eight streams",
		recs: []*event.Request{
			stallStreamRec("a", 0, 60, 10*msec, 200*msec, 15*msec),
			stallStreamRec("b", 1*msec, 60, 10*msec, 200*msec, 15*msec),
			stallStreamRec("c", 2*msec, 60, 10*msec, 200*msec, 15*msec),
			stallStreamRec("d", 3*msec, 60, 10*msec, 0, 0),
			stallStreamRec("e", 4*msec, 60, 10*msec, 0, 0),
			stallStreamRec("f", 5*msec, 60, 10*msec, 0, 0),
			stallStreamRec("g", 6*msec, 60, 10*msec, 0, 0),
			stallStreamRec("h", 7*msec, 60, 10*msec, 0, 0),
		},
	},
	{
		name: "pauses not overlapping",
		recs: []*event.Request{
			stallStreamRec("a", 0, 60, 10*msec, 100*msec, 50*msec),
			stallStreamRec("b", 0, 60, 10*msec, 250*msec, 50*msec),
			stallStreamRec("c", 0, 60, 10*msec, 400*msec, 50*msec),
		},
	},
	{
		name: "gap usual for a slow stream",
		recs: []*event.Request{
			stallStreamRec("a", 0, 40, 30*msec, 200*msec, 12*msec),
			stallStreamRec("b", 0, 40, 30*msec, 200*msec, 12*msec),
			stallStreamRec("c", 0, 40, 30*msec, 200*msec, 12*msec),
		},
	},
	{
		name: "two separate stalls",
		recs: []*event.Request{
			stallStreamRec("a", 0, 80, 10*msec, 200*msec, 60*msec),
			stallStreamRec("b", 0, 80, 10*msec, 200*msec, 60*msec),
			stallStreamRec("c", 0, 80, 10*msec, 200*msec, 60*msec),
			stallStreamRec("d", 0, 80, 10*msec, 600*msec, 60*msec),
			stallStreamRec("e", 0, 80, 10*msec, 600*msec, 60*msec),
			stallStreamRec("f", 0, 80, 10*msec, 600*msec, 60*msec),
		},
		wantMarkers: 2, wantStreams: 3,
	},
}

func TestDetector(t *testing.T) {
	t.Parallel()
	tests := detectorCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := New(Config{})
			var got []event.Marker
			for _, r := range tt.recs {
				got = append(got, d.Add(r)...)
			}
			got = append(got, d.Flush()...)
			if len(got) != tt.wantMarkers {
				t.Fatalf("got %d markers, want %d: %+v", len(got), tt.wantMarkers, got)
			}
			for _, m := range got {
				if m.Kind != event.MarkerStall || int(m.Values["streams"]) != tt.wantStreams || len(m.RequestIDs) != tt.wantStreams {
					t.Fatalf("marker %+v, want a stall of %d streams", m, tt.wantStreams)
				}
				if m.Values["gap_ms"] < 10 || m.Duration < 10*msec || m.Message == "" || m.Cause == "" {
					t.Fatalf("marker %+v: pause too short or no message", m)
				}
			}
		})
	}
}

func TestStallFoundOnceAcrossLateRecords(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	d := New(Config{Hold: time.Second})
	// Four streams pause together at 200 ms but finish at very different
	// times (short, long and very long generations).
	a := stallStreamRec("a", 0, 30, 10*ms, 200*ms, 50*ms)
	b := stallStreamRec("b", 0, 100, 10*ms, 200*ms, 50*ms)
	c := stallStreamRec("c", 0, 300, 10*ms, 200*ms, 50*ms)
	late := stallStreamRec("late", 0, 900, 10*ms, 200*ms, 50*ms)
	var got []event.Marker
	for _, r := range []*event.Request{a, b} {
		got = append(got, d.Add(r)...)
	}
	if len(got) != 0 {
		t.Fatalf("stall reported with two streams: %+v", got)
	}
	// The third stream completes the stall; it is held, then emitted once
	// time has moved on.
	got = append(got, d.Add(c)...)
	got = append(got, d.Advance(stallT0.Add(5*time.Second))...)
	if len(got) != 1 || got[0].Values["streams"] != 3 {
		t.Fatalf("got %+v, want one stall of 3 streams", got)
	}
	// A fourth stream reporting the same pause much later joins silently.
	got = append(got, d.Add(late)...)
	got = append(got, d.Flush()...)
	if len(got) != 1 {
		t.Fatalf("same stall reported %d times: %+v", len(got), got)
	}

	// Without the hold passing, all four are in the one marker.
	d2 := New(Config{Hold: time.Minute})
	var got2 []event.Marker
	for _, r := range []*event.Request{late, a, c, b} {
		got2 = append(got2, d2.Add(r)...)
	}
	got2 = append(got2, d2.Flush()...)
	if len(got2) != 1 || got2[0].Values["streams"] != 4 {
		t.Fatalf("got %+v, want one stall of 4 streams", got2)
	}
	if want := stallT0.Add(200 * ms); got2[0].Time.Before(want.Add(-10*ms)) || got2[0].Time.After(want.Add(10*ms)) {
		t.Fatalf("stall at %s, want about %s", got2[0].Time, want)
	}
}

func TestDetectorMemoryBounded(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	d := New(Config{MaxGaps: 100, Window: time.Hour})
	for i := range 2000 {
		// Each stream pauses alone at its own time: gaps pile up, no stall.
		start := time.Duration(i) * time.Second
		d.Add(stallStreamRec(fmt.Sprint(i), start, 20, 10*ms, start+50*ms, 80*ms))
	}
	if len(d.gaps) > 100 {
		t.Fatalf("detector keeps %d gaps, want at most 100", len(d.gaps))
	}
	d2 := New(Config{Window: time.Minute})
	for i := range 2000 {
		start := time.Duration(i) * time.Second
		for j := range 3 {
			d2.Add(stallStreamRec(fmt.Sprint(i, "-", j), start, 20, 10*ms, start+50*ms, 80*ms))
		}
	}
	if len(d2.stalls) > 70 || len(d2.gaps) > 10 {
		t.Fatalf("detector keeps %d stalls and %d gaps after the window", len(d2.stalls), len(d2.gaps))
	}
}

func TestDetectorIgnoresShortAndNil(t *testing.T) {
	t.Parallel()
	d := New(Config{})
	if m := d.Add(nil); m != nil {
		t.Fatalf("nil record gave %v", m)
	}
	short := &event.Request{ID: "s", Start: stallT0, Chunks: []event.Chunk{{At: 0}, {At: time.Second}}}
	for range 5 {
		d.Add(short)
	}
	if len(d.gaps) != 0 {
		t.Fatalf("a two-chunk stream produced gaps")
	}
}

// clientStages are a record's client stages when it was written at sent,
// had its headers at headers and its first content at first, all from its
// start (its intended time).
func clientStages(sent, headers, first time.Duration) []event.StageTiming {
	st := func(s event.Stage, d time.Duration) event.StageTiming {
		return event.StageTiming{Stage: s, Duration: d, Provenance: event.Measured}
	}
	return []event.StageTiming{
		st(event.StageSerialize, sent/2), st(event.StageWrite, sent-sent/2),
		st(event.StageWaitHeaders, headers-sent), st(event.StageFirstToken, first-headers),
	}
}

// oneRequest makes a record of a request sent at sent (from stallT0) that
// got its headers at headers and its first of n tokens at first, one every
// 10 ms.
func oneRequest(id string, sent, headers, first time.Duration, n int) *event.Request {
	start := stallT0.Add(sent - time.Millisecond)
	r := &event.Request{ID: id, Start: start, Intended: start, Outcome: event.OutcomeOK,
		Stages: clientStages(time.Millisecond, headers-sent+time.Millisecond, first-sent+time.Millisecond)}
	for i := range n {
		r.Chunks = append(r.Chunks, event.Chunk{At: first - sent + time.Millisecond + time.Duration(i)*10*time.Millisecond, Tokens: 1})
	}
	return r
}

// fourPausing are four streams of 10 ms gaps that pause for pause at 200 ms.
func fourPausing(pause time.Duration) []*event.Request {
	ms := time.Millisecond
	var out []*event.Request
	for i := range 4 {
		out = append(out, stallStreamRec(fmt.Sprint("s", i), time.Duration(i)*ms, 60, 10*ms, 200*ms, pause))
	}
	return out
}

// staggeredPausing are four streams of 10 ms gaps that pause at 200 ms,
// stream i for pause + i×step: they resume one after another.
func staggeredPausing(pause, step time.Duration) []*event.Request {
	ms := time.Millisecond
	var out []*event.Request
	for i := range 4 {
		out = append(out, stallStreamRec(fmt.Sprint("s", i), time.Duration(i)*ms, 60, 10*ms, 200*ms, pause+time.Duration(i)*step))
	}
	return out
}

// afterLongestGap is the index of r's first chunk after its longest gap
// (0 when it has fewer than two chunks).
func afterLongestGap(r *event.Request) int {
	longest, after := time.Duration(0), 0
	for i := 1; i < len(r.Chunks); i++ {
		if g := r.Chunks[i].At - r.Chunks[i-1].At; g > longest {
			longest, after = g, i
		}
	}
	return after
}

// withBurst makes each stream's first chunk after its longest gap carry
// three tokens: a front end that held the frames while the engine kept
// decoding releases them together.
func withBurst(recs []*event.Request) []*event.Request {
	for _, r := range recs {
		if after := afterLongestGap(r); after > 0 {
			r.Chunks[after].Tokens = 3
		}
	}
	return recs
}

// withSlowBurst makes each stream resume after its longest gap with one
// token and bring three in its next read, a normal gap later: a front end
// working through its backlog sends the first frame it finds, then the
// held ones.
func withSlowBurst(recs []*event.Request) []*event.Request {
	for _, r := range recs {
		if after := afterLongestGap(r); after > 0 && after+1 < len(r.Chunks) {
			r.Chunks[after+1].Tokens = 3
		}
	}
	return recs
}

// detect feeds recs (and the probe's late moments) to a detector and
// returns every marker.
func detect(t *testing.T, recs []*event.Request, starved ...interval) []event.Marker {
	t.Helper()
	return detectOn(t, vllmLike, recs, starved...)
}

// vllmLike is a server that batches prefills with decoding and tokenizes
// on the loop that writes its frames, as vLLM does.
var vllmLike = Server{Kind: "vllm", BatchesPrefill: true, TokenizesOnLoop: true}

// detectOn is detect against a server of the given design.
func detectOn(t *testing.T, srv Server, recs []*event.Request, starved ...interval) []event.Marker {
	t.Helper()
	d := New(Config{Server: srv})
	for _, s := range starved {
		d.Starved(s.from, s.to)
	}
	var got []event.Marker
	for _, r := range recs {
		got = append(got, d.Add(r)...)
	}
	return append(got, d.Flush()...)
}

// stallCauseCase is one of TestStallCauses's cases.
type stallCauseCase struct {
	name     string
	recs     []*event.Request
	starved  []interval
	want     event.StallCause
	evidence string // in the message
}

// stallCauseCases are TestStallCauses's cases.
func stallCauseCases() []stallCauseCase {
	ms := time.Millisecond
	at := func(d time.Duration) time.Time { return stallT0.Add(d) }
	timed := func(r *event.Request, stages map[event.Stage]time.Duration) *event.Request {
		r.Server = &event.ServerTiming{Source: "test", Stages: stages}
		return r
	}
	return []stallCauseCase{
		{
			name:     "nothing else ran and the held tokens came in a burst: the front end by elimination",
			recs:     withBurst(fourPausing(30 * ms)),
			want:     event.StallFrontEndBlock,
			evidence: "piled up and came in a burst",
		},
		{
			// A loaded front end writes the held frames out stream by
			// stream, 7 ms apart: each stream's burst follows its own
			// resumption, not the first stream's.
			name:     "the held frames went out one stream after another, each in a burst",
			recs:     withBurst(staggeredPausing(30*ms, 6*ms)),
			want:     event.StallFrontEndBlock,
			evidence: "the tokens of 4 of 4 streams piled up",
		},
		{
			name:     "the held tokens came in the read after the one that resumed the streams",
			recs:     withSlowBurst(fourPausing(30 * ms)),
			want:     event.StallFrontEndBlock,
			evidence: "the tokens of 4 of 4 streams piled up",
		},
		{
			name:     "nothing else ran but no burst followed: the engine paused, unexplained",
			recs:     fourPausing(30 * ms),
			want:     event.StallUnexplained,
			evidence: "no burst of held tokens ended it",
		},
		{
			name: "a request's front-end work covers it",
			recs: append(withBurst(fourPausing(30*ms)),
				// Written just before the pause, headers just after it, queued a while.
				oneRequest("tok", 199*ms, 232*ms, 900*ms, 3)),
			want:     event.StallFrontEndBlock,
			evidence: "request tok was written",
		},
		{
			name:     "the server's tokenization covers it",
			recs:     append(withBurst(fourPausing(30*ms)), timed(oneRequest("tok", 199*ms, 200*ms, 900*ms, 3), map[event.Stage]time.Duration{event.StageTokenize: 30 * ms})),
			want:     event.StallFrontEndBlock,
			evidence: "the server's tokenization of request tok",
		},
		{
			name: "a front-end window in it without a burst after it is no evidence",
			recs: append(fourPausing(30*ms),
				oneRequest("tok", 199*ms, 232*ms, 900*ms, 3)),
			want:     event.StallUnexplained,
			evidence: "may have been in prefill",
		},
		{
			name:     "another request's first token ends it",
			recs:     append(fourPausing(30*ms), oneRequest("new", 150*ms, 151*ms, 245*ms, 3)),
			want:     event.StallPrefillInterference,
			evidence: "request new's first token came",
		},
		{
			name: "the server's timing puts a prefill over it",
			recs: append(fourPausing(30*ms),
				timed(oneRequest("pre", 150*ms, 151*ms, 400*ms, 3), map[event.Stage]time.Duration{event.StagePrefill: 250 * ms})),
			want:     event.StallPrefillInterference,
			evidence: "the server's timing puts request pre's",
		},
		{
			name:     "a request may have been in prefill: unexplained",
			recs:     append(fourPausing(30*ms), oneRequest("wait", 150*ms, 151*ms, 900*ms, 3)),
			want:     event.StallUnexplained,
			evidence: "1 of the 5 request(s) then in flight had no first token yet: any may have been in prefill",
		},
		{
			name:     "the probe ran late over it",
			recs:     append(fourPausing(30*ms), oneRequest("new", 150*ms, 151*ms, 245*ms, 3)),
			starved:  []interval{{at(195 * ms), at(250 * ms)}},
			want:     event.StallProbeStarved,
			evidence: "latscope's own goroutines ran late",
		},
		{
			name:     "a little probe lag is not the cause",
			recs:     withBurst(fourPausing(30 * ms)),
			starved:  []interval{{at(200 * ms), at(205 * ms)}},
			want:     event.StallFrontEndBlock,
			evidence: "no prefill ran in it",
		},
	}
}

func TestStallCauses(t *testing.T) {
	t.Parallel()
	tests := stallCauseCases()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := detect(t, tt.recs, tt.starved...)
			if len(got) != 1 {
				t.Fatalf("got %d markers, want 1: %+v", len(got), got)
			}
			m := got[0]
			if m.Cause != tt.want || !strings.Contains(m.Message, tt.evidence) || !strings.HasPrefix(m.Message, causeWords[tt.want]+": 4 streams") {
				t.Fatalf("marker %q (cause %s), want cause %s with %q", m.Message, m.Cause, tt.want, tt.evidence)
			}
			if m.Values["streams"] != 4 || len(m.RequestIDs) != 4 {
				t.Fatalf("marker %+v: want the four paused streams", m)
			}
		})
	}
}

// A long prefill in chunks slows every decode step it shares, one pause
// after another; the request whose first token ends the run was waiting
// for it through all of them, and the run is one marker.
func TestStallRunOfChunkedPrefill(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	var recs []*event.Request
	for i := range 4 {
		r := &event.Request{ID: fmt.Sprint("s", i), Start: stallT0, Intended: stallT0, Outcome: event.OutcomeOK,
			Stages: clientStages(ms, 2*ms, 5*ms)}
		at := 5*ms + time.Duration(i)*100*time.Microsecond
		for k := range 80 {
			r.Chunks = append(r.Chunks, event.Chunk{At: at, Tokens: 1})
			if k >= 20 && k < 26 { // six 30 ms steps: the prefill's chunks
				at += 30 * ms
			} else {
				at += 10 * ms
			}
		}
		recs = append(recs, r)
	}
	// The long prompt was sent at 100 ms, had its headers at 110 ms and
	// its first token one step after the last chunk.
	recs = append(recs, oneRequest("long", 100*ms, 110*ms, 5*ms+20*10*ms+6*30*ms+10*ms, 5))
	got := detect(t, recs)
	if len(got) != 1 {
		t.Fatalf("got %d markers, want one for the run: %+v", len(got), got)
	}
	m := got[0]
	if m.Cause != event.StallPrefillInterference || m.Values["pauses"] != 6 || !strings.Contains(m.Message, "request long") {
		t.Fatalf("marker %q (%s, %v pauses), want prefill interference over 6 pauses naming request long", m.Message, m.Cause, m.Values["pauses"])
	}
}

// A stall waits for the requests sent before it ended: their records may
// hold the evidence (here, the first token that ended it).
func TestStallWaitsForRequestsInFlight(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	d := New(Config{Hold: time.Second, MaxHold: time.Minute, Server: vllmLike})
	d.Sent("new", stallT0.Add(150*ms))
	var got []event.Marker
	for _, r := range fourPausing(30 * ms) {
		got = append(got, d.Add(r)...)
	}
	got = append(got, d.Advance(stallT0.Add(10*time.Second))...)
	if len(got) != 0 {
		t.Fatalf("stall emitted while a request sent before it was in flight: %+v", got)
	}
	got = append(got, d.Add(oneRequest("new", 150*ms, 151*ms, 245*ms, 3))...)
	if len(got) != 1 || got[0].Cause != event.StallPrefillInterference {
		t.Fatalf("got %+v, want one prefill interference once the request reported", got)
	}

	// Never reported: given up after MaxHold.
	d2 := New(Config{Hold: time.Second, MaxHold: 20 * time.Second})
	d2.Sent("lost", stallT0.Add(150*ms))
	for _, r := range fourPausing(30 * ms) {
		d2.Add(r)
	}
	if got := d2.Advance(stallT0.Add(15 * time.Second)); len(got) != 0 {
		t.Fatalf("emitted before MaxHold: %+v", got)
	}
	if got := d2.Advance(stallT0.Add(21 * time.Second)); len(got) != 1 || got[0].Cause != event.StallUnexplained {
		t.Fatalf("got %+v, want the stall after MaxHold, unexplained (the lost request may have been prefilling)", got)
	}
}

func TestSharedPause(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	d := New(Config{Hold: time.Hour})
	for _, r := range fourPausing(30 * ms) {
		d.Add(r)
	}
	if !d.SharedPause("x", stallT0.Add(190*ms), stallT0.Add(232*ms)) {
		t.Errorf("a gap over the four streams' stall is not a shared pause")
	}
	if d.SharedPause("x", stallT0.Add(400*ms), stallT0.Add(440*ms)) {
		t.Errorf("a gap where no other stream paused is a shared pause")
	}
}

// TestHeldBurst: a stream is ahead of its cadence after a pause only when
// the held tokens came on top of it, however the backlog was split into
// reads; a stream keeping its cadence, early reads and all, is not.
func TestHeldBurst(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name    string
		reads   []time.Duration // from the resumption on
		tokens  []int
		typical int
		want    bool
	}{
		{"the cadence resumes", []time.Duration{0, 10 * ms, 20 * ms, 30 * ms}, []int{1, 1, 1, 1}, 1, false},
		{"the next read half a gap early", []time.Duration{0, 5 * ms, 20 * ms}, []int{1, 1, 1}, 1, false},
		{"the held tokens in the resuming read", []time.Duration{0, 10 * ms}, []int{3, 1}, 1, true},
		{"two held tokens a few ms after it", []time.Duration{0, 2 * ms, 3 * ms, 28 * ms}, []int{1, 1, 1, 1}, 1, true},
		{"the backlog a gap after the first token", []time.Duration{0, 11 * ms, 13 * ms}, []int{1, 11, 1}, 1, true},
		{"a coalescing stream keeping its cadence", []time.Duration{0, 10 * ms, 20 * ms}, []int{2, 2, 2}, 2, false},
		{"a coalescing stream's held tokens", []time.Duration{0, 10 * ms}, []int{6, 2}, 2, true},
		{"the backlog after the window", []time.Duration{0, 10 * ms, 21 * ms}, []int{1, 1, 9}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reads := append([]time.Duration{-40 * ms}, tt.reads...)
			tokens := append([]int{1}, tt.tokens...)
			if got := heldBurst(reads, tokens, 1, 10*ms, tt.typical); got != tt.want {
				t.Fatalf("heldBurst = %t, want %t", got, tt.want)
			}
		})
	}
}
