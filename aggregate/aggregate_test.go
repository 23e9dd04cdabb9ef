package aggregate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// within reports whether got is within rel (a fraction) of want.
func within(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Abs(want)
}

func TestCountsAndOutcomes(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	addAll(a,
		okReq(t0, 100*time.Millisecond, 10*time.Millisecond, 5),
		okReq(t0.Add(time.Second), 100*time.Millisecond, 10*time.Millisecond, 5),
		errReq(t0.Add(2*time.Second), event.OutcomeHTTPStatus, 503),
		errReq(t0.Add(2*time.Second), event.OutcomeHTTPStatus, 429),
		errReq(t0.Add(2*time.Second), event.OutcomeHTTPStatus, 503),
		errReq(t0.Add(3*time.Second), event.OutcomeTimeout, 0),
	)
	warm := okReq(t0.Add(-time.Minute), 5*time.Second, time.Second, 3)
	warm.Warmup = true
	addAll(a, warm)
	flagged := okReq(t0.Add(3*time.Second), 100*time.Millisecond, 10*time.Millisecond, 5)
	flagged.Flags = []event.Flag{event.FlagNagleSuspect, event.FlagMissingUsage}
	addAll(a, flagged)

	got := a.Summary().Requests
	if got.Sent != 7 || got.OK != 3 || got.Errors != 4 || got.Warmup != 1 {
		t.Fatalf("counts = sent %d ok %d errors %d warmup %d, want 7 3 4 1", got.Sent, got.OK, got.Errors, got.Warmup)
	}
	if got.ByOutcome[event.OutcomeHTTPStatus] != 3 || got.ByOutcome[event.OutcomeTimeout] != 1 || len(got.ByOutcome) != 2 {
		t.Errorf("by outcome = %v", got.ByOutcome)
	}
	if got.ByStatus[503] != 2 || got.ByStatus[429] != 1 || len(got.ByStatus) != 2 {
		t.Errorf("by status = %v", got.ByStatus)
	}
	if got.Flags[event.FlagNagleSuspect] != 1 || got.Flags[event.FlagMissingUsage] != 1 {
		t.Errorf("flags = %v", got.Flags)
	}
	if got.TokensOut != 15 {
		t.Errorf("tokens out = %d, want 15", got.TokensOut)
	}
	// The warm-up request was intended a minute earlier and must not stretch the run.
	s := a.Summary()
	if !s.Start.Equal(t0) {
		t.Errorf("start = %v, want %v", s.Start, t0)
	}
	if s.TTFT.Count != 3 || s.TTFT.Max != 100 {
		t.Errorf("ttft = %+v, want 3 values of 100 ms (warm-up's 5 s excluded)", s.TTFT)
	}
	// Run: t0 → last completion (t0+3s + 140ms).
	if want := 3140 * time.Millisecond; s.Duration != want {
		t.Errorf("duration = %v, want %v", s.Duration, want)
	}
	if !within(got.ReqPerSec, 7/3.14, 1e-9) {
		t.Errorf("req/s = %v, want %v", got.ReqPerSec, 7/3.14)
	}
}

func TestPercentilesFromKnownDistribution(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	// TTFT 1..1000 ms, all completing within one second: every window holds all.
	for i := 1; i <= 1000; i++ {
		addAll(a, okReq(t0, time.Duration(i)*time.Millisecond, 0, 1))
	}
	now := t0.Add(1500 * time.Millisecond)
	snap := a.Snapshot(now)
	tests := []struct {
		w   Window
		rel float64 // HDR precision: 3 digits for the run, 2 for window slots
	}{{WinRun, 0.001}, {Win10s, 0.01}, {Win1m, 0.01}, {Win5m, 0.01}}
	for _, tc := range tests {
		t.Run(tc.w.String(), func(t *testing.T) {
			got := snap.Windows[tc.w].TTFT
			if got.Count != 1000 {
				t.Fatalf("count = %d, want 1000", got.Count)
			}
			if got.Mean != 500.5 || got.Max != 1000 {
				t.Errorf("mean %v max %v, want exactly 500.5 and 1000", got.Mean, got.Max)
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{{"p50", got.P50, 500}, {"p90", got.P90, 900}, {"p99", got.P99, 990}} {
				if !within(c.got, c.want, tc.rel) {
					t.Errorf("%s = %v, want %v ±%.1f%%", c.name, c.got, c.want, tc.rel*100)
				}
			}
		})
	}
}

func TestITLTPOTAndRate(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	r := okReq(base(), 200*time.Millisecond, 20*time.Millisecond, 11) // 10 gaps of 20 ms
	r.Chunks[5].Tokens = 3                                            // one chunk of 3 tokens is still one gap
	r.OutputTokens = 13
	addAll(a, r)
	s := a.Summary()
	if s.ITL.Count != 10 || s.ITL.Mean != 20 || s.ITL.Max != 20 {
		t.Errorf("itl = %+v, want 10 gaps of 20 ms", s.ITL)
	}
	// TPOT = (E2E − TTFT)/(tokens − 1) = 200 ms / 12.
	if want := float64((200*time.Millisecond)/12) / 1e6; !within(s.TPOT.Mean, want, 1e-3) {
		t.Errorf("tpot mean = %v, want %v", s.TPOT.Mean, want)
	}
	if s.E2E.Max != 400 {
		t.Errorf("e2e max = %v, want 400", s.E2E.Max)
	}
	if want := 13 / 0.4; !within(s.TokensPerSec.Mean, want, 1e-3) {
		t.Errorf("tok/s per request = %v, want %v", s.TokensPerSec.Mean, want)
	}
}

func TestWindowsExpireAsNowMoves(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	for i := 0; i < 20; i++ {
		// Complete at t0 + i*100ms + 50ms: all inside [t0, t0+2s).
		addAll(a, okReq(t0.Add(time.Duration(i)*100*time.Millisecond), 50*time.Millisecond, 0, 1))
	}
	tests := []struct {
		after                   time.Duration
		want10s, want1m, want5m int64
	}{
		{5 * time.Second, 20, 20, 20},
		{15 * time.Second, 0, 20, 20},
		{2 * time.Minute, 0, 0, 20},
		{6 * time.Minute, 0, 0, 0},
	}
	for _, tc := range tests {
		snap := a.Snapshot(t0.Add(tc.after))
		got := [3]int64{snap.Windows[Win10s].TTFT.Count, snap.Windows[Win1m].TTFT.Count, snap.Windows[Win5m].TTFT.Count}
		want := [3]int64{tc.want10s, tc.want1m, tc.want5m}
		if got != want {
			t.Errorf("now=t0+%v: ttft counts 10s/1m/5m = %v, want %v", tc.after, got, want)
		}
		if sent := snap.Windows[Win10s].Sent; sent != tc.want10s {
			t.Errorf("now=t0+%v: 10s sent = %d, want %d", tc.after, sent, tc.want10s)
		}
		if snap.Windows[WinRun].TTFT.Count != 20 {
			t.Errorf("now=t0+%v: run count = %d, want 20", tc.after, snap.Windows[WinRun].TTFT.Count)
		}
	}
	// Rates over the covered span: 20 requests in 9.5 s of a 10 s window.
	w := a.Snapshot(t0.Add(9500 * time.Millisecond)).Windows[Win10s]
	if w.Span != 9500*time.Millisecond || !within(w.ReqPerSec, 20/9.5, 1e-9) || !within(w.TokPerSec, 20/9.5, 1e-9) {
		t.Errorf("10s window span %v req/s %v tok/s %v, want 9.5s and %v", w.Span, w.ReqPerSec, w.TokPerSec, 20/9.5)
	}
}

func TestLateEventsKeepRunButSkipReusedSlots(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	addAll(a, okReq(t0.Add(time.Hour), 10*time.Millisecond, 0, 1))
	addAll(a, okReq(t0.Add(time.Hour-10*time.Second), 10*time.Millisecond, 0, 1)) // one fine ring ago: its slot is taken
	s := a.Snapshot(t0.Add(time.Hour + time.Second))
	if s.Windows[WinRun].TTFT.Count != 2 {
		t.Errorf("run count = %d, want 2", s.Windows[WinRun].TTFT.Count)
	}
	if s.Windows[Win10s].TTFT.Count != 1 {
		t.Errorf("10s count = %d, want 1", s.Windows[Win10s].TTFT.Count)
	}
	if s.Windows[Win1m].TTFT.Count != 2 {
		t.Errorf("1m count = %d, want 2", s.Windows[Win1m].TTFT.Count)
	}
}

func TestClampCounts(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	r := okReq(base(), 20*time.Minute, 0, 1)
	r.SchedLag = -time.Millisecond
	addAll(a, r)
	s := a.Summary()
	if s.Requests.Clamped != 3 { // ttft, ttft_answer, e2e over 10 min; the negative sched lag is kept
		t.Errorf("clamped = %d, want 3", s.Requests.Clamped)
	}
	if s.SchedLag.Negative != 1 || s.SchedLag.Mean != -1 || s.SchedLag.Max != -1 {
		t.Errorf("sched lag %+v, want one negative value, mean and max -1 ms", s.SchedLag)
	}
	if s.TTFT.Max != 600000 {
		t.Errorf("ttft max = %v, want 600000 (clamped to 10 min)", s.TTFT.Max)
	}
}

func TestStagesAndBreakdown(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	for i := 0; i < 4; i++ {
		r := okReq(t0, 100*time.Millisecond, 0, 1)
		r.Stages = []event.StageTiming{
			{Stage: event.StageDNS, Duration: time.Duration(i+1) * time.Millisecond, Provenance: event.Measured},
			{Stage: event.StageWaitHeaders, Duration: 50 * time.Millisecond, Provenance: event.Measured},
		}
		prov := event.ServerReported
		if i == 0 {
			prov = event.Estimated
		}
		r.Breakdown = []event.StageTiming{
			{Stage: event.StageQueue, Duration: 60 * time.Millisecond, Provenance: prov},
			{Stage: event.StagePrefill, Duration: 30 * time.Millisecond, Provenance: event.ServerReported},
			{Stage: event.StageUnattributed, Duration: 10 * time.Millisecond, Provenance: event.Estimated},
		}
		addAll(a, r)
	}
	addAll(a, okReq(t0, 300*time.Millisecond, 0, 1)) // no breakdown: not in the shares
	s := a.Summary()
	if dns := s.Stages[event.StageDNS]; dns.Count != 4 || dns.Mean != 2.5 || dns.Max != 4 {
		t.Errorf("dns = %+v, want 4 values mean 2.5 max 4", dns)
	}
	b := s.Breakdown
	if b.Requests != 4 {
		t.Fatalf("breakdown requests = %d, want 4", b.Requests)
	}
	q := b.Stages[event.StageQueue]
	if q.Mean != 60 || !within(q.Share, 0.6, 1e-9) {
		t.Errorf("queue = %+v, want mean 60 share 0.6", q)
	}
	if want := []event.Provenance{event.ServerReported, event.Estimated}; len(q.Provenance) != 2 || q.Provenance[0] != want[0] || q.Provenance[1] != want[1] {
		t.Errorf("queue provenance = %v, want %v", q.Provenance, want)
	}
	if !within(b.UnattributedShare, 0.1, 1e-9) {
		t.Errorf("unattributed share = %v, want 0.1", b.UnattributedShare)
	}
}

func TestServerSamples(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	for i, q := range []float64{0, 2, 4, 2} {
		a.Add(event.NewServer(&event.ServerSample{
			Time: t0.Add(time.Duration(i) * time.Second), Source: "http://x/metrics", Dialect: "vllm", Interval: time.Second,
			Waiting: ptr(q), Running: ptr(8), KVCache: ptr(0.25 * float64(i)),
			Stages: map[string]event.HistStat{"queue": {Count: float64(10 * (i + 1)), Mean: time.Duration(i+1) * 10 * time.Millisecond}},
		}))
	}
	// A failed scrape: its (repeated) values do not count, but its state shows.
	a.Add(event.NewServer(&event.ServerSample{
		Time: t0.Add(4 * time.Second), Source: "http://x/metrics", Dialect: "vllm", Stale: true, Error: "connection refused", Waiting: ptr(100),
	}))
	s := a.Summary().Server
	if s.Samples != 5 || s.Stale != 1 || !s.LastStale || s.LastError != "connection refused" || s.Dialect != "vllm" {
		t.Errorf("server state = %+v", s)
	}
	if s.QueueDepth.Peak != 4 || !within(s.QueueDepth.Mean, 7.0/3, 1e-9) {
		t.Errorf("queue depth = %+v, want peak 4 and time-weighted mean 7/3", s.QueueDepth)
	}
	if s.Running.Mean != 8 || s.KVCache.Peak != 0.75 {
		t.Errorf("running %+v kv %+v", s.Running, s.KVCache)
	}
	// Count-weighted: (10·10 + 20·20 + 30·30 + 40·40) / 100 ms = 30 ms.
	if got := s.StageMeans["queue"]; !within(got, 30, 1e-9) {
		t.Errorf("server queue mean = %v ms, want 30", got)
	}
	if !within(s.QueueSlope, 0.8, 1e-9) { // least squares over 0,2,4,2 at 0..3 s
		t.Errorf("queue slope = %v, want 0.8", s.QueueSlope)
	}
	w := a.Snapshot(t0.Add(4 * time.Second)).Windows[Win10s]
	if !w.HasQueueDepth || w.QueueDepthMean != 2 || !within(w.ServerStageMeans["queue"], 30, 1e-9) {
		t.Errorf("10s server window: queue %v (%t) stages %v", w.QueueDepthMean, w.HasQueueDepth, w.ServerStageMeans)
	}
}

func TestServerSampleNaNIgnored(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	a.Add(event.NewServer(&event.ServerSample{Time: base(), Waiting: ptr(math.NaN()), Running: ptr(math.Inf(1)),
		Stages: map[string]event.HistStat{"queue": {Count: math.NaN(), Mean: time.Second}}}))
	s := a.Summary().Server
	if s.QueueDepth.Seen || s.Running.Seen || len(s.StageMeans) != 0 {
		t.Errorf("non-finite values were used: %+v", s)
	}
}

func TestGPUAndMarkers(t *testing.T) {
	t.Parallel()
	a := New(Config{RecentMarkers: 3})
	t0 := base()
	a.Add(event.NewGPU(&event.GPUSample{Time: t0, Available: false, Reason: "no driver"}))
	a.Add(event.NewGPU(&event.GPUSample{Time: t0.Add(time.Second), Available: true, Simulated: true,
		Devices: []event.GPUDevice{{Index: 0, Name: "Sim GPU"}}}))
	for i := 0; i < 5; i++ {
		kind := event.MarkerStall
		if i%2 == 1 {
			kind = event.MarkerGap
		}
		cause := event.StallPrefillInterference
		if i == 4 {
			cause = event.StallProbeStarved
		}
		a.Add(event.NewMarker(&event.Marker{Time: t0.Add(time.Duration(i) * time.Second), Kind: kind, Cause: cause, Message: string(rune('a' + i))}))
	}
	s := a.Summary()
	if c := s.Markers.StallCauses; len(c) != 2 || c[event.StallPrefillInterference] != 2 || c[event.StallProbeStarved] != 1 {
		t.Errorf("stall causes = %v, want 2 prefill interference and 1 probe starved (gaps have no cause)", c)
	}
	var table strings.Builder
	if err := WriteTable(&table, s); err != nil {
		t.Fatal(err)
	}
	if want := "Markers: gap 2, stall 3 (prefill interference 2, probe starved 1)"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
	if s.GPU == nil || !s.GPU.Available || !s.GPU.Simulated {
		t.Errorf("gpu = %+v, want the last (simulated) sample", s.GPU)
	}
	if s.Markers.Counts[event.MarkerStall] != 3 || s.Markers.Counts[event.MarkerGap] != 2 {
		t.Errorf("marker counts = %v", s.Markers.Counts)
	}
	var msgs string
	for _, m := range s.Markers.Recent {
		msgs += m.Message
	}
	if msgs != "cde" {
		t.Errorf("recent markers = %q, want the last three oldest first: cde", msgs)
	}
}

func TestSnapshotIsIndependent(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	addAll(a, errReq(t0, event.OutcomeTimeout, 0))
	snap := a.Snapshot(t0.Add(time.Second))
	addAll(a, errReq(t0, event.OutcomeTimeout, 0), errReq(t0, event.OutcomeConnect, 0))
	if snap.Requests.ByOutcome[event.OutcomeTimeout] != 1 || len(snap.Requests.ByOutcome) != 1 || snap.Requests.Sent != 1 {
		t.Errorf("snapshot changed after later Adds: %+v", snap.Requests)
	}
}

func TestAddDoesNotAllocatePerValue(t *testing.T) {
	a := New(Config{})
	r := okReq(base(), 100*time.Millisecond, 10*time.Millisecond, 128)
	r.Stages = []event.StageTiming{{Stage: event.StageDNS, Duration: time.Millisecond}, {Stage: event.StageConnect, Duration: time.Millisecond}}
	r.Breakdown = []event.StageTiming{{Stage: event.StageQueue, Duration: 50 * time.Millisecond, Provenance: event.ServerReported}}
	ev := event.NewRequest(r)
	a.Add(ev) // first use creates the metrics and slots
	if allocs := testing.AllocsPerRun(100, func() { a.Add(ev) }); allocs != 0 {
		t.Errorf("Add of a 128-chunk record allocated %v times, want 0", allocs)
	}
}

func TestMaliciousStageNamesAreBounded(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	for i := 0; i < 200; i++ {
		r := okReq(base(), time.Millisecond, 0, 1)
		r.Stages = []event.StageTiming{{Stage: event.Stage(rune(0x4e00 + i)), Duration: time.Millisecond}}
		r.Outcome = event.OutcomeOK
		addAll(a, r)
		addAll(a, &event.Request{Outcome: event.Outcome(rune(0x4e00 + i)), Status: 1000 + i})
	}
	s := a.Summary()
	if len(s.Stages) > maxStageKeys || s.Requests.DroppedStages != 200-maxStageKeys {
		t.Errorf("stages %d dropped %d", len(s.Stages), s.Requests.DroppedStages)
	}
	if len(s.Requests.ByOutcome) > maxCountKeys+1 || len(s.Requests.ByStatus) > maxCountKeys+1 {
		t.Errorf("outcome keys %d status keys %d", len(s.Requests.ByOutcome), len(s.Requests.ByStatus))
	}
}

// TestMarkersInTimeOrder: markers that arrive out of time order (a stall is
// reported once it is over, after later markers) are listed in time order.
func TestMarkersInTimeOrder(t *testing.T) {
	t.Parallel()
	a := New(Config{RecentMarkers: 3})
	for _, at := range []int{1, 4, 2, 3} {
		a.Add(event.NewMarker(&event.Marker{Time: base().Add(time.Duration(at) * time.Second), Kind: event.MarkerNote, Message: fmt.Sprint(at)}))
	}
	var msgs string
	for _, m := range a.Summary().Markers.Recent {
		msgs += m.Message
	}
	if msgs != "234" {
		t.Errorf("recent markers %q, want the last three to arrive, in time order: 234", msgs)
	}
}

// TestCancelledAtEndOfRun: requests the run's end cancelled are sent but
// neither ok nor errors; they are out of the error rate and the finished
// rate, and do not stretch the run. A cancelled request without RunEnded (a
// recording from before a signal's cancellations were marked) counts the
// same.
func TestCancelledAtEndOfRun(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	for i := range 8 {
		addAll(a, okReq(t0.Add(time.Duration(i)*time.Second), 100*time.Millisecond, 0, 1))
	}
	addAll(a, errReq(t0.Add(time.Second), event.OutcomeHTTPStatus, 500))
	interrupted := errReq(t0.Add(2*time.Second), event.OutcomeCancelled, 0)
	addAll(a, interrupted)
	for range 2 {
		cut := errReq(t0.Add(7*time.Second), event.OutcomeCancelled, 0)
		cut.RunEnded, cut.E2E, cut.OutputTokens = true, time.Minute, 3 // cut when a long drain was over
		addAll(a, cut)
	}
	s := a.Summary()
	r := s.Requests
	if r.Sent != 12 || r.OK != 8 || r.Errors != 1 || r.CancelledAtEnd != 3 || r.ByOutcome[event.OutcomeCancelled] != 0 {
		t.Fatalf("requests %+v: want 12 sent, 8 ok, 1 error (the 500), 3 cancelled at the end", r)
	}
	if rate, _ := r.ErrorRate(); rate != 1.0/9 {
		t.Errorf("error rate %v, want 1 of 9 finished", rate)
	}
	if r.Duration != 7*time.Second+100*time.Millisecond || r.ReqPerSec != 9/r.Duration.Seconds() {
		t.Errorf("duration %v, %v req/s: want the finished requests' span and rate", r.Duration, r.ReqPerSec)
	}
	if r.TokensOut != 8+6 {
		t.Errorf("tokens out %d, want the cut requests' 6 too", r.TokensOut)
	}
	if w := a.Snapshot(a.Latest()).Windows[WinRun]; w.Sent != 9 || w.Errors != 1 {
		t.Errorf("run window: %d sent, %d errors; want the 9 finished", w.Sent, w.Errors)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, s); err != nil {
		t.Fatal(err)
	}
	if want := "Requests: 12 sent, 8 ok, 1 errors (11.11%), 3 cancelled at the end of the run;"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
	if line := StatusLine(a.Snapshot(a.Latest())); !strings.Contains(line, "errors 1 (11.1%)  cancelled 3") {
		t.Errorf("status line %q: want 1 error, 11%% of the finished, and 3 cancelled apart", line)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"cancelled_at_end": 3`) {
		t.Errorf("JSON lacks cancelled_at_end:\n%s", js.String())
	}
}

// TestReconnectsFromTheProbe: the probe's latest counts of reconnects and
// back-offs are in the summary, its table and its JSON.
func TestReconnectsFromTheProbe(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	addAll(a, okReq(base(), 100*time.Millisecond, 0, 1))
	a.Add(event.NewProbe(&event.ProbeSample{Time: base(), Reconnects: 2}))
	a.Add(event.NewProbe(&event.ProbeSample{Time: base().Add(time.Second), Reconnects: 7, Backoffs: 1}))
	s := a.Summary()
	if s.Requests.Reconnects != 7 || s.Requests.Backoffs != 1 {
		t.Fatalf("requests %+v: want the latest sample's 7 reconnects and 1 back-off", s.Requests)
	}
	var table, js bytes.Buffer
	if err := WriteTable(&table, s); err != nil {
		t.Fatal(err)
	}
	if want := "Connections: 7 requests sent again on a fresh connection"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"reconnects": 7`) {
		t.Errorf("JSON lacks the reconnects:\n%s", js.String())
	}
}

// TestSummaryFoldsRepeatedStalls: the table lists a run of stalls of one
// cause as one line, counted, and keeps other markers apart.
func TestSummaryFoldsRepeatedStalls(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	add := func(sec int, kind event.MarkerKind, cause event.StallCause, msg string) {
		a.Add(event.NewMarker(&event.Marker{Time: t0.Add(time.Duration(sec) * time.Second), Kind: kind, Cause: cause, Message: msg}))
	}
	for i := range 5 {
		add(i, event.MarkerStall, event.StallPrefillInterference, fmt.Sprintf("prefill interference %d", i))
	}
	add(5, event.MarkerNote, "", "load step")
	add(6, event.MarkerStall, event.StallPrefillInterference, "prefill interference 6")

	runs := FoldStalls(a.Summary().Markers.Recent)
	if len(runs) != 3 || runs[0].Count != 5 || runs[0].Message != "prefill interference 4" || !runs[0].First.Equal(t0) || runs[1].Count != 1 || runs[2].Count != 1 {
		t.Fatalf("runs %+v: want the five stalls as one, the note, the last stall", runs)
	}
	var table strings.Builder
	if err := WriteTable(&table, a.Summary()); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	if !strings.Contains(out, "×5 since "+t0.Format(time.TimeOnly+".000")+" · prefill interference 4") ||
		strings.Contains(out, "prefill interference 3") || !strings.Contains(out, "load step") {
		t.Errorf("table markers:\n%s", out)
	}
}

// TestSummaryOnWallClockTimes: live events carry monotonic clock readings,
// recorded ones do not; the summary of the same events is the same either
// way, because the aggregator keeps wall-clock times only.
func TestSummaryOnWallClockTimes(t *testing.T) {
	t.Parallel()
	now := time.Now() // with a monotonic reading
	var live []event.Event
	for i := range 20 {
		at := now.Add(time.Duration(i) * 7 * time.Millisecond)
		live = append(live,
			event.NewRequest(&event.Request{ID: fmt.Sprint("r", i), Intended: at, Start: at, Outcome: event.OutcomeOK,
				TTFT: 3 * time.Millisecond, E2E: 13 * time.Millisecond, OutputTokens: 11}),
			event.NewServer(&event.ServerSample{Time: at, Source: "m", Waiting: new(float64(i % 3))}))
	}
	a, b := New(Config{}), New(Config{})
	for _, ev := range live {
		a.Add(ev)
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back event.Event
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatal(err)
		}
		b.Add(back)
	}
	sa, sb := a.Summary(), b.Summary()
	if sa.Start != sa.Start.Round(0) {
		t.Errorf("summary start %v keeps a monotonic reading", sa.Start)
	}
	ja, _ := json.Marshal(sa)
	jb, _ := json.Marshal(sb)
	if string(ja) != string(jb) {
		t.Errorf("live and recorded events summarize differently:\nlive     %s\nrecorded %s", ja, jb)
	}
	if st := live[1].Server.Time; st == st.Round(0) {
		t.Error("the server sample's time was changed in place: the payload is shared with other consumers")
	}
}
