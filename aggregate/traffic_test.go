package aggregate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// trafficSample is one second of a vLLM server's metrics: n requests, each
// with the given queue, prefill and decode times and 10 ms more of
// end-to-end; their TTFTs all in the (0.1, 0.25] bucket.
func trafficSample(at time.Time, n float64, queue, prefill, decode time.Duration) *event.ServerSample {
	e2e := queue + prefill + decode + 10*time.Millisecond
	bounds := []float64{0.1, 0.25, 1}
	return &event.ServerSample{
		Time: at, Source: "m", Dialect: "vllm", Interval: time.Second,
		Waiting: ptr(4), Running: ptr(8), KVCache: ptr(0.5),
		PromptTokensPerSec: ptr(n * 100), GenTokensPerSec: ptr(n * 50),
		Preemptions: ptr(1), PrefixQueries: ptr(1000), PrefixHits: ptr(250),
		Stages: map[string]event.HistStat{
			"queue":   {Count: n, Mean: queue},
			"prefill": {Count: n, Mean: prefill},
			"decode":  {Count: n, Mean: decode},
			"e2e":     {Count: n, Mean: e2e},
			"ttft":    {Count: n, Mean: 200 * time.Millisecond, Bounds: bounds, Counts: []float64{0, n, 0, 0}},
		},
	}
}

func TestTrafficBreakdown(t *testing.T) {
	t.Parallel()
	now := base().Add(5 * time.Second)
	a := New(Config{Now: func() time.Time { return now }})
	for i := range 5 {
		a.Add(event.NewServer(trafficSample(base().Add(time.Duration(i)*time.Second), 10, 600*time.Millisecond, 30*time.Millisecond, 360*time.Millisecond)))
	}
	tr := a.Snapshot(now).Windows[Win10s].Traffic
	if !tr.Seen || tr.Span != 5*time.Second || tr.Requests != 50 || tr.ReqPerSec != 10 {
		t.Fatalf("traffic = %+v, want 50 requests over 5 s", tr)
	}
	if tr.ShareOf != "e2e" || len(tr.Phases) != 4 {
		t.Fatalf("phases %+v of %q, want queue, prefill, decode, rest of e2e", tr.Phases, tr.ShareOf)
	}
	for i, want := range []struct {
		name  string
		share float64
		mean  time.Duration
	}{{PhaseQueue, 0.6, 600 * time.Millisecond}, {PhasePrefill, 0.03, 30 * time.Millisecond}, {PhaseDecode, 0.36, 360 * time.Millisecond}, {PhaseRest, 0.01, 10 * time.Millisecond}} {
		p := tr.Phases[i]
		if p.Name != want.name || math.Abs(p.Share-want.share) > 1e-6 || (p.Mean-want.mean).Abs() > time.Microsecond {
			t.Errorf("phase %d = %+v, want %s %.2f %v", i, p, want.name, want.share, want.mean)
		}
	}
	if tr.PromptTokPerSec != 1000 || tr.GenTokPerSec != 500 || !tr.HasTokens {
		t.Errorf("tokens/s = %v, %v", tr.PromptTokPerSec, tr.GenTokPerSec)
	}
	if tr.QueueDepth != 4 || tr.KVCache != 0.5 || tr.Preemptions != 5 || tr.PrefixHitRate != 0.25 || tr.PrefixFrom != "counters" {
		t.Errorf("gauges = %+v", tr)
	}
	p50 := tr.Quantiles["ttft"].P50
	if !p50.OK || p50.Lower != 100*time.Millisecond || p50.Upper != 250*time.Millisecond || p50.Value != 200*time.Millisecond {
		t.Errorf("ttft p50 = %+v, want 200 ms (every TTFT is in that bucket: their mean) between 100 and 250", p50)
	}
	// The whole run holds the same.
	if run := a.Snapshot(now).Windows[WinRun].Traffic; run.Requests != 50 || len(run.Phases) != 4 {
		t.Errorf("run traffic = %+v", run)
	}
}

func TestBucketEstimate(t *testing.T) {
	t.Parallel()
	bounds := []float64{1, 2}
	for _, c := range []struct {
		q      float64
		counts []float64
		want   BucketEstimate
	}{
		{0.5, []float64{10, 0, 0}, BucketEstimate{OK: true, Value: 500 * time.Millisecond, Upper: time.Second}},
		{0.5, []float64{0, 10, 0}, BucketEstimate{OK: true, Value: 1500 * time.Millisecond, Lower: time.Second, Upper: 2 * time.Second}},
		{0.99, []float64{5, 4, 1}, BucketEstimate{OK: true, Value: 2 * time.Second, Lower: 2 * time.Second, Above: true}},
		{0.5, []float64{0, 0, 0}, BucketEstimate{}},
		{0.5, []float64{1, 1}, BucketEstimate{}},
	} {
		if got := bucketEstimate(c.q, bounds, c.counts); got != c.want {
			t.Errorf("q %v of %v = %+v, want %+v", c.q, c.counts, got, c.want)
		}
	}
}

// llama.cpp gives per-token time only: the phases' shares are of their
// sum, and nothing is made up for the queue.
func TestTrafficPerToken(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	a.Add(event.NewServer(&event.ServerSample{Time: base(), Dialect: "llamacpp", Interval: time.Second,
		Stages: map[string]event.HistStat{
			"prefill_per_token": {Count: 1000, Mean: time.Millisecond},
			"decode_per_token":  {Count: 100, Mean: 30 * time.Millisecond},
		}}))
	tr := a.Snapshot(base()).Windows[Win10s].Traffic
	if tr.ShareOf != "phases" || len(tr.Phases) != 2 || !tr.Phases[0].PerToken || math.Abs(tr.Phases[0].Share-0.25) > 1e-9 {
		t.Errorf("phases %+v of %q", tr.Phases, tr.ShareOf)
	}
	// llama.cpp counts tokens, not requests: its request rate is not
	// reported, never shown as 0.
	if tr.HasRequests {
		t.Errorf("requests %v reported from per-token counters", tr.Requests)
	}
	if line := trafficLine(tr); !strings.Contains(line, "req/s not reported") || strings.Contains(line, "0.0 req/s") {
		t.Errorf("status line %q", line)
	}
	var b strings.Builder
	writeTraffic(&b, tr)
	if !strings.Contains(b.String(), "requests not reported") {
		t.Errorf("table:\n%s", b.String())
	}
}

// A watch session's summary carries the traffic, and its table and status
// line say what each figure is.
func TestWatchText(t *testing.T) {
	t.Parallel()
	now := base().Add(5 * time.Second)
	a := New(Config{Now: func() time.Time { return now }})
	a.Add(event.NewSession(&event.Session{Target: "http://h", Server: "vllm", Load: event.Load{Mode: event.LoadCanary, Rate: 0.5}}))
	for i := range 5 {
		a.Add(event.NewServer(trafficSample(base().Add(time.Duration(i)*time.Second), 10, 600*time.Millisecond, 30*time.Millisecond, 360*time.Millisecond)))
	}
	addAll(a, okReq(base(), 200*time.Millisecond, 10*time.Millisecond, 8))
	snap := a.Snapshot(now)
	line := WatchStatusLine(snap)
	for _, want := range []string{"10.0 req/s", "queue 60% prefill 3% decode 36% rest 1% of e2e", "TTFT p50 ≈200 ms (100ms–250ms)", "queue 4.0  running 8.0  KV 50% · preempted 5 · prefix hits 25%", "canary: 1 ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("status line %q lacks %q", line, want)
		}
	}
	sum := snap.Summary()
	if sum.Traffic == nil || sum.Traffic.Requests != 50 || !sum.Traffic.HasRequests {
		t.Fatalf("summary traffic = %+v", sum.Traffic)
	}
	var b strings.Builder
	if err := WriteWatchTable(&b, sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"queue     60.0%  600 ms per request", "bucket estimates", "the canary (latscope's own requests, 0.5/s", "ttft  n 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	// A run that does not watch has no traffic in its summary.
	b2 := New(Config{})
	b2.Add(event.NewServer(trafficSample(base(), 10, time.Second, time.Second, time.Second)))
	if s := b2.Snapshot(base()).Summary(); s.Traffic != nil {
		t.Error("a run's summary carries traffic")
	}
}

// All of a window's observations in one bucket: the quantiles are their
// mean, inside the bucket's bounds, not the bucket's middle.
func TestTrafficOneBucketAtMean(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	a.Add(event.NewServer(&event.ServerSample{Time: base(), Dialect: "vllm", Interval: time.Second,
		Stages: map[string]event.HistStat{
			"prefill": {Count: 10, Mean: 42 * time.Millisecond, Bounds: []float64{0.3, 0.5}, Counts: []float64{10, 0, 0}},
			"e2e":     {Count: 10, Mean: 400 * time.Millisecond, Bounds: []float64{0.3, 0.5}, Counts: []float64{5, 5, 0}},
			"ttft":    {Count: 10, Mean: 900 * time.Millisecond, Bounds: []float64{0.3, 0.5}, Counts: []float64{0, 0, 10}},
		}}))
	q := a.Snapshot(base()).Windows[Win10s].Traffic.Quantiles
	near := func(d, want time.Duration) bool { return (d - want).Abs() < time.Microsecond }
	if p := q["prefill"]; !near(p.P50.Value, 42*time.Millisecond) || !near(p.P99.Value, 42*time.Millisecond) || p.P50.Upper != 300*time.Millisecond {
		t.Errorf("prefill one bucket: %+v", p)
	}
	if e := q["e2e"]; e.P50.Value != 300*time.Millisecond || e.P90.Value != 460*time.Millisecond {
		t.Errorf("e2e over two buckets: interpolated as before, got %+v", e)
	}
	if f := q["ttft"]; !f.P50.Above || f.P50.Value != 500*time.Millisecond {
		t.Errorf("ttft past the last bound: %+v", f)
	}
}
