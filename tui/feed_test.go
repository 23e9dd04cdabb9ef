package tui

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

func TestLiveFeed(t *testing.T) {
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	feed := NewLiveFeed(snaps)
	_, v0 := feed.Frame()
	snaps.Put(aggregate.Snapshot{Now: t0.Add(time.Second)})
	fr, v1 := feed.Frame()
	if v1 == v0 || !fr.Snapshot.Now.Equal(t0.Add(time.Second)) || fr.Finished {
		t.Fatalf("version %d→%d, snapshot %v, finished %v: a new snapshot is not a new frame", v0, v1, fr.Snapshot.Now, fr.Finished)
	}
	if _, again := feed.Frame(); again != v1 {
		t.Fatal("version changed without new data")
	}
	// The aggregator's last snapshot says its events ended: the session
	// is over.
	snaps.Put(aggregate.Snapshot{Now: t0.Add(2 * time.Second), Ended: true})
	if fr, v2 := feed.Frame(); !fr.Finished || v2 == v1 {
		t.Fatalf("after the session ended: finished %v, version %d → %d; want finished, a new version", fr.Finished, v1, v2)
	}
}

// The requests view lists the aggregator's sample: every request it took,
// whether or not a screen was watching.
func TestLiveFeedListsTheAggregatorsSample(t *testing.T) {
	agg := aggregate.New(aggregate.Config{})
	r := &event.Request{ID: "r1", Intended: t0, Start: t0, TTFT: 5 * time.Millisecond, E2E: 9 * time.Millisecond, Outcome: event.OutcomeOK}
	agg.Add(event.NewRequest(r))
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	snaps.Put(agg.Snapshot(t0.Add(time.Second)))
	fr, _ := NewLiveFeed(snaps).Frame()
	if got := fr.Snapshot.Sample.Latest; len(got) != 1 || got[0] != r {
		t.Fatalf("latest %v, want the one request", got)
	}
}

// longReq is a request of n chunks 1 ms apart, with one 40 ms gap before
// chunk n/3, ending at end.
func longReq(n int, end time.Time) *event.Request {
	r := &event.Request{ID: "long", TTFT: 5 * time.Millisecond, Outcome: event.OutcomeOK, OutputTokens: n}
	at := 5 * time.Millisecond
	for k := range n {
		if k == n/3 {
			at += 40 * time.Millisecond
		}
		r.Chunks = append(r.Chunks, event.Chunk{At: at, Tokens: 1})
		at += time.Millisecond
	}
	r.E2E = at
	r.Start, r.Intended = end.Add(-at), end.Add(-at)
	return r
}

// A long request's waterfall drawn from the sample, which keeps its chunks
// thinned, says what the whole request's would: the same decode numbers
// and the same token ticks.
func TestThinnedWaterfallIsTheWholeRequests(t *testing.T) {
	full := longReq(8192, t0.Add(10*time.Second))
	agg := aggregate.New(aggregate.Config{SampleKeep: 3})
	agg.Add(event.NewRequest(full))
	got := agg.Snapshot(t0.Add(10 * time.Second)).Sample
	if len(got.Latest) != 1 || len(got.Latest[0].Chunks) >= len(full.Chunks) {
		t.Fatalf("latest %v: want the request, thinned", got.Latest)
	}
	kept := got.Latest[0]
	sum, ok := got.Decode[kept]
	if !ok {
		t.Fatal("no decode numbers for the thinned request")
	}
	st := newStyles(plainRenderer(), true)
	for _, width := range []int{80, 200, 400} {
		want := strings.Join(renderWaterfall(st, full, nil, width, 30), "\n")
		have := strings.Join(renderWaterfall(st, kept, &sum, width, 30), "\n")
		if have != want {
			t.Errorf("width %d: thinned waterfall differs:\n%s\nwant:\n%s", width, have, want)
		}
	}
}

// Over a live feed the screen looks when a snapshot comes (or after a
// second of none), never sooner than the render tick after its last look.
func TestScreenWaitsForTheLiveFeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		snaps := pipeline.NewLatest[aggregate.Snapshot]()
		m := newModel(WithNotices(NewLiveFeed(snaps), nil), Options{}, plainRenderer())
		if m.changed == nil {
			t.Fatal("the live feed's changes do not reach the screen through WithNotices")
		}
		start := time.Now()
		_, cmd := m.Update(m.Init()()) // the first look, at once
		snaps.Put(aggregate.Snapshot{Now: t0.Add(time.Second)})
		msg := cmd().(tickMsg) // woken by the snapshot, not by a timer
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the screen woke %v after the snapshot, want at once", waited)
		}
		// The snapshot came before the render tick since the last look:
		// the screen looks once the tick is over.
		_, cmd = m.Update(msg)
		if m.version != 0 {
			t.Fatal("the screen looked sooner than the render tick after its last look")
		}
		msg = cmd().(tickMsg)
		if waited := time.Since(start); waited != renderEvery {
			t.Fatalf("the second look came %v after the first, want %v", waited, renderEvery)
		}
		_, cmd = m.Update(msg)
		if m.version != 1 {
			t.Fatalf("version %d after the look, want the snapshot's (1)", m.version)
		}
		// Nothing new: the screen looks again a second later.
		cmd()
		if waited := time.Since(start) - renderEvery; waited != waitLongest {
			t.Fatalf("with no snapshot the screen looked after %v, want %v", waited, waitLongest)
		}
	})
}

// A feed that cannot say when it changes is looked at every render tick.
func TestScreenPollsAFeedWithoutChanges(t *testing.T) {
	m := newModel(StaticFeed{}, Options{}, plainRenderer())
	if m.changed != nil {
		t.Fatal("a static feed has no change channel")
	}
	if _, cmd := m.Update(tickMsg{}); cmd == nil || m.version != 1 {
		t.Fatalf("the first tick did not look (version %d) or set no next tick", m.version)
	}
}
