package aggregate

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// realisticRequest is a 128-chunk record with every client stage and a full
// breakdown, its numbers jittered by rng.
func realisticRequest(rng *rand.Rand, at time.Time) *event.Request {
	jit := func(d time.Duration) time.Duration { return d/2 + time.Duration(rng.Int64N(int64(d))) }
	ttft := jit(200 * time.Millisecond)
	r := &event.Request{Intended: at, Start: at, Outcome: event.OutcomeOK, TTFT: ttft, OutputTokens: 128, SchedLag: jit(100 * time.Microsecond)}
	at2 := ttft
	r.Chunks = make([]event.Chunk, 128)
	for i := range r.Chunks {
		r.Chunks[i] = event.Chunk{At: at2, Tokens: 1}
		at2 += jit(20 * time.Millisecond)
	}
	r.E2E = r.Chunks[127].At
	for _, st := range event.ClientStages() {
		r.Stages = append(r.Stages, event.StageTiming{Stage: st, Duration: jit(5 * time.Millisecond), Provenance: event.Measured})
	}
	for _, st := range event.BreakdownStages() {
		r.Breakdown = append(r.Breakdown, event.StageTiming{Stage: st, Duration: jit(20 * time.Millisecond), Provenance: event.ServerReported})
	}
	return r
}

// fiveMinutes feeds 5 minutes at 20 req/s of realistic records: every metric
// (6 latency metrics, 10 client stages, 9 breakdown stages: 25 in all) has
// data in every slot of every window.
func fiveMinutes(a *Aggregator) time.Time {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := base()
	var now time.Time
	for i := 0; i < 20*300; i++ {
		now = t0.Add(time.Duration(i) * 50 * time.Millisecond)
		a.Add(event.NewRequest(realisticRequest(rng, now)))
	}
	return now
}

// TestMemoryStaysModest measures the histograms after 5 minutes of load
// over 25 metrics. The bound is generous; the log line has the number.
func TestMemoryStaysModest(t *testing.T) {
	if testing.Short() {
		t.Skip("feeds 6000 records")
	}
	t.Parallel()
	a := New(Config{})
	fiveMinutes(a)
	n := a.MemoryBytes()
	t.Logf("histogram memory after 5 min at 20 req/s, 25 metrics: %d KiB", n/1024)
	if n > 16<<20 {
		t.Errorf("histograms hold %d bytes, want under 16 MiB", n)
	}
}

// BenchmarkAddRequest adds 128-chunk records arriving at 20 req/s, so slots
// rotate as in a run (a fine slot every 20 records, a coarse one every 200).
// "full" records carry 10 client and 9 breakdown stages too; "chunks" only
// the chunks, which isolates the per-token (ITL) cost.
func BenchmarkAddRequest(b *testing.B) {
	for _, full := range []bool{true, false} {
		name := "full"
		if !full {
			name = "chunks"
		}
		b.Run(name, func(b *testing.B) {
			a := New(Config{})
			rng := rand.New(rand.NewPCG(1, 2))
			const pool = 256
			reqs := make([]*event.Request, pool)
			for i := range reqs {
				reqs[i] = realisticRequest(rng, base())
				if !full {
					reqs[i].Stages, reqs[i].Breakdown = nil, nil
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := reqs[i%pool]
				r.Intended = base().Add(time.Duration(i) * 50 * time.Millisecond)
				r.Start = r.Intended
				a.Add(event.NewRequest(r))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/128, "ns/token")
		})
	}
}

func BenchmarkSnapshot(b *testing.B) {
	a := New(Config{})
	now := fiveMinutes(a)
	b.ReportMetric(float64(a.MemoryBytes())/1024, "KiB-histograms")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = a.Snapshot(now)
	}
}

// BenchmarkSnapshotLive is a live view's snapshot: after five busy minutes,
// half a second later each time, with a request finished in between, so
// the windows move and the newest slot changed, as at one stream.
func BenchmarkSnapshotLive(b *testing.B) {
	a := New(Config{})
	now := fiveMinutes(a)
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(500 * time.Millisecond)
		a.Add(event.NewRequest(realisticRequest(rng, now)))
		_ = a.Snapshot(now)
	}
}
