package aggregate

import (
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// longReq is a request of n chunks 1 ms apart, with one 40 ms gap before
// chunk n/3, ending at end.
func longReq(i, n int, end time.Time) *event.Request {
	r := sampleReq(i, end, 5*time.Millisecond)
	at := 5 * time.Millisecond
	for k := range n {
		if k == n/3 {
			at += 40 * time.Millisecond
		}
		r.Chunks = append(r.Chunks, event.Chunk{At: at, Tokens: 1})
		at += time.Millisecond
	}
	r.OutputTokens = n
	r.E2E = at
	return r
}

// TestSamplerThinsLongRequests checks that the sampler keeps at most
// sampleChunks chunks of a long request, and that the decode numbers it
// publishes are the whole request's (the dashboard's test draws both
// waterfalls).
func TestSamplerThinsLongRequests(t *testing.T) {
	t0 := base()
	full := longReq(1, 8192, t0.Add(10*time.Second))
	s := newRequestSampler(3)
	s.add(full)
	got := s.sample(t0.Add(10 * time.Second))
	if len(got.Latest) != 1 {
		t.Fatalf("latest holds %d requests, want 1", len(got.Latest))
	}
	kept := got.Latest[0]
	if n := len(kept.Chunks); n > sampleChunks || n < 2 {
		t.Fatalf("sampled request keeps %d chunks, want 2 to %d", n, sampleChunks)
	}
	if len(full.Chunks) != 8192 {
		t.Fatalf("the record itself changed: %d chunks", len(full.Chunks))
	}
	sum, ok := got.Decode[kept]
	if !ok {
		t.Fatal("no decode numbers for the thinned request")
	}
	if want := DecodeOf(full); sum != want {
		t.Fatalf("thinned request's decode %+v, want the whole request's %+v", sum, want)
	}
	if kept.Chunks[0] != full.Chunks[0] || kept.Chunks[len(kept.Chunks)-1] != full.Chunks[len(full.Chunks)-1] {
		t.Error("thinning lost the first or last chunk")
	}
	for i := 1; i < len(kept.Chunks); i++ {
		if !slices.Contains(full.Chunks, kept.Chunks[i]) || kept.Chunks[i].At < kept.Chunks[i-1].At {
			t.Fatalf("thinned chunk %d is not one of the request's, in order", i)
		}
	}
}

// TestSamplerHoldsBoundedChunks feeds the sampler ten minutes of long
// requests and checks the chunks it holds stay within its lists' bound.
func TestSamplerHoldsBoundedChunks(t *testing.T) {
	t0 := base()
	s := newRequestSampler(DefaultSampleKeep)
	for i := range 6000 { // 10 a second
		s.add(longReq(i, 2048+i%7, t0.Add(time.Duration(i)*100*time.Millisecond)))
	}
	held := map[*event.Request]bool{}
	for _, it := range s.latest {
		held[it.r] = true
	}
	for _, tn := range slices.Concat([]topN{s.run}, s.fine.slots, s.coarse.slots) {
		for _, it := range tn.items {
			held[it.r] = true
		}
	}
	chunks := 0
	for r := range held {
		chunks += len(r.Chunks)
	}
	// The latest, the run's, the 10 s ring's 10 slots, and the 5-minute
	// ring after pruning: about keep × (2 + ln 30), not keep per slot.
	capacity := s.keep * (1 + 1 + len(s.fine.slots) + 8)
	if limit := capacity * sampleChunks; chunks > limit {
		t.Errorf("sampler holds %d chunks, want at most %d", chunks, limit)
	}
	if got := s.sample(t0.Add(600 * time.Second)); len(got.Slowest[Win5m]) != DefaultSampleKeep {
		t.Errorf("5m list holds %d, want %d", len(got.Slowest[Win5m]), DefaultSampleKeep)
	}
}
