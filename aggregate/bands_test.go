package aggregate

import (
	"math"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// queuedBreakdown gives r a breakdown that adds up to its TTFT: the queue takes
// queueShare of it, prefill 20 ms (or what is left), unattributed the rest.
func queuedBreakdown(r *event.Request, queueShare float64) *event.Request {
	queue := time.Duration(float64(r.TTFT) * queueShare)
	prefill := min(20*time.Millisecond, r.TTFT-queue)
	r.Breakdown = []event.StageTiming{
		{Stage: event.StageWrite, Duration: 0, Provenance: event.Measured},
		{Stage: event.StageQueue, Duration: queue, Provenance: event.ServerReported},
		{Stage: event.StagePrefill, Duration: prefill, Provenance: event.ServerReported},
		{Stage: event.StageUnattributed, Duration: r.TTFT - queue - prefill, Provenance: event.Estimated},
	}
	return r
}

func sumStages(b Band) float64 {
	var s float64
	for _, v := range b.Stages {
		s += v
	}
	return s
}

func TestBandSegmentsAddUpToTheTTFTTheyClaim(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	// 1,000 requests: most around 50 ms with a small queue; the slowest 1%
	// wait 2 s, nearly all of it queued.
	for i := range 1000 {
		ttft, share := time.Duration(40+i%20)*time.Millisecond, 0.1
		if i%100 == 99 {
			ttft, share = 2*time.Second+time.Duration(i)*time.Microsecond, 0.95
		}
		addAll(a, queuedBreakdown(okReq(t0.Add(time.Duration(i)*time.Millisecond), ttft, 10*time.Millisecond, 8), share))
	}
	snap := a.Snapshot(t0.Add(5 * time.Second))
	for _, w := range []Window{Win10s, WinRun} {
		for _, b := range snap.Windows[w].Bands {
			if b.Requests == 0 {
				t.Fatalf("%s band %s is empty", w, b.Stat)
			}
			if got := sumStages(b); math.Abs(got-b.TTFT) > 1e-6 {
				t.Errorf("%s band %s: stages add up to %.6f ms, the bar claims %.6f ms", w, b.Stat, got, b.TTFT)
			}
		}
	}
	bands := snap.Windows[WinRun].Bands
	if m := bands[BandMean]; m.Requests != 1000 || math.Abs(m.TTFT-snap.Windows[WinRun].TTFT.Mean) > 0.01 {
		t.Errorf("mean band: %d requests, TTFT %.3f ms; want all 1000 and the TTFT mean %.3f", m.Requests, m.TTFT, snap.Windows[WinRun].TTFT.Mean)
	}
	p99 := bands[BandP99]
	if p99.Requests != 10 || p99.TTFT < 2000 || p99.Stages[event.StageQueue]/p99.TTFT < 0.9 {
		t.Errorf("p99 band: %d requests, TTFT %.1f ms, queue %.1f ms; want the 10 slowest, queue-bound", p99.Requests, p99.TTFT, p99.Stages[event.StageQueue])
	}
	if p50 := bands[BandP50]; p50.TTFT > 100 || p50.MinTTFT > p50.TTFT || p50.MaxTTFT < p50.TTFT {
		t.Errorf("p50 band: TTFT %.1f ms in [%.1f, %.1f]: want a typical request", p50.TTFT, p50.MinTTFT, p50.MaxTTFT)
	}
	if d := bands[BandMean].Decode; math.Abs(d-70) > 0.01 {
		t.Errorf("mean decode %.3f ms, want 70 (7 gaps of 10 ms)", d)
	}
}

func TestBandOfOneRequest(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	addAll(a, queuedBreakdown(okReq(base(), 80*time.Millisecond, time.Millisecond, 2), 0.5))
	for _, b := range a.Snapshot(base().Add(time.Second)).Windows[Win10s].Bands {
		if b.Requests != 1 || b.TTFT != 80 {
			t.Errorf("band %s of one request: %+v", b.Stat, b)
		}
	}
}

func TestBucketsCoverEveryTTFT(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, time.Microsecond, bandBase, time.Millisecond, time.Second, time.Hour} {
		k := bucketOf(d)
		lo, hi := bucketEdges(k)
		if k < bandBuckets-1 && (d < lo || d >= hi) {
			t.Errorf("%v in bucket %d [%v, %v)", d, k, lo, hi)
		}
	}
}
