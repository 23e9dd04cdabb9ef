package probe_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/probe"
)

// poissonTrace is n requests arriving at rate per second, Poisson, with
// short prompts and outputs.
func poissonTrace(n int, rate float64) *probe.Trace {
	rng := rand.New(rand.NewPCG(7, 7))
	tr := &probe.Trace{Format: "jsonl"}
	var at time.Duration
	for range n {
		tr.Requests = append(tr.Requests, probe.TraceRequest{At: at, PromptTokens: 16 + rng.IntN(48), OutputTokens: 2 + rng.IntN(3)})
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
	}
	return tr
}

// hiccups records, until ctx ends, the stretches in which this process's
// goroutines woke more than late after their 1 ms tick: then the machine,
// not the probe or the server, decided when anything ran.
func hiccups(ctx context.Context, late time.Duration) <-chan []window {
	out := make(chan []window, 1)
	go func() {
		var ws []window
		defer func() { out <- ws }()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Now()
			if now.Sub(last) > time.Millisecond+late {
				ws = append(ws, window{last, now})
			}
			last = now
		}
	}()
	return out
}

// quickStream answers every completion at once with two tokens, so the
// test's server costs the shared cores next to nothing.
func quickStream(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	const chunk = `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}` + "\n\n"
	_, _ = io.WriteString(w, chunk+chunk+`data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":2}}`+"\n\ndata: [DONE]\n\n")
}

// traceRun replays a 1,000-request Poisson trace at 50 req/s (times speed)
// against a server that answers at once, checks that every request was
// meant for its time in the trace and asked for the trace's output, and
// returns how late each was sent: all of them, and those not due while this
// process's own timers ran late (then the machine, not the probe, decided
// when anything ran; the machine's two cores are shared).
func traceRun(tb testing.TB, speed float64) (all, clean []time.Duration) {
	tb.Helper()
	tr := poissonTrace(1000, 50)
	srv := httptest.NewServer(http.HandlerFunc(quickStream))
	tb.Cleanup(srv.Close)
	watchCtx, stopWatch := context.WithCancel(tb.Context())
	watched := hiccups(watchCtx, time.Millisecond)
	res := runLoad(tb, simClient(tb, srv.URL, nil), probe.LoadConfig{Trace: tr, TraceSpeed: speed, Drain: 10 * time.Second},
		prompts(tb, 32, 2, 1), nil)
	stopWatch()
	late := <-watched
	if len(res.recs) != len(tr.Requests) {
		tb.Fatalf("%d records for %d trace requests", len(res.recs), len(tr.Requests))
	}
	first := res.recs[0].Intended
	for _, r := range res.recs {
		if r.Intended.Before(first) {
			first = r.Intended
		}
	}
	for _, r := range res.recs {
		want := tr.Requests[r.Seq]
		if d := r.Intended.Sub(first) - time.Duration(float64(want.At)/speed); d > time.Microsecond || d < -time.Microsecond {
			tb.Fatalf("request %d meant for %v after the first, the trace says %v", r.Seq, r.Intended.Sub(first), time.Duration(float64(want.At)/speed))
		}
		if r.TargetOutputTokens != want.OutputTokens || !r.OK() {
			tb.Fatalf("request %d: %s %s, asked %d tokens, the trace says %d", r.Seq, r.Outcome, r.Error, r.TargetOutputTokens, want.OutputTokens)
		}
		lag := r.Start.Sub(r.Intended)
		all = append(all, lag)
		due := window{r.Intended.Add(-time.Millisecond), r.Start}
		if !slices.ContainsFunc(late, func(w window) bool { return w.overlap(due) > 0 }) {
			clean = append(clean, lag)
		}
	}
	slices.Sort(all)
	slices.Sort(clean)
	return all, clean
}

// A trace replays on its schedule: every request is meant for its time in
// the trace (over the speed), with the trace's lengths, and none is sent
// before its time. How late they go out is a matter of speed, measured by
// BenchmarkTraceSchedule, not asserted here.
func TestTraceReplaysOnSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 1,000 requests: not under -short")
	}
	all, _ := traceRun(t, 8)
	if all[0] < 0 {
		t.Fatalf("a request was sent %v before its time", -all[0])
	}
}

// BenchmarkTraceSchedule measures how late trace requests go out against
// their schedule (the target: within 1 ms at p99 at 50 req/s), beside a
// baseline in the same process: how late a plain timer set for the same
// moments wakes.
//
//	go test ./probe -run '^$' -bench TraceSchedule -benchtime 1x
func BenchmarkTraceSchedule(b *testing.B) {
	for range b.N {
		all, clean := traceRun(b, 1)
		base := timerLateness(poissonTrace(1000, 50))
		p99 := func(ds []time.Duration) float64 { return float64(ds[len(ds)*99/100]) / float64(time.Millisecond) }
		b.ReportMetric(p99(all), "p99-ms")
		if len(clean) > 0 {
			b.ReportMetric(p99(clean), "p99-quiet-ms")
		}
		b.ReportMetric(p99(base), "timer-p99-ms")
		b.ReportMetric(p99(all)/max(p99(base), 1e-6), "x-timer")
	}
}

// timerLateness sleeps until each of the trace's times with a plain timer
// and returns how late each wake-up was, sorted.
func timerLateness(tr *probe.Trace) []time.Duration {
	start := time.Now()
	out := make([]time.Duration, 0, len(tr.Requests))
	for _, r := range tr.Requests {
		due := start.Add(r.At)
		time.Sleep(time.Until(due))
		out = append(out, time.Since(due))
	}
	slices.Sort(out)
	return out
}
