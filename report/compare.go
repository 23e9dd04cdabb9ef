package report

import (
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/stats"
)

// Alpha is the family-wise error rate of a comparison: the chance that any
// row of two runs from the same distribution is called significant.
const Alpha = 0.05

// Rule says, in the output, how a comparison decides what is significant.
const Rule = "Welch's t-test (two-sided) on each statistic's values in the equal, consecutive windows of each run " +
	"(10 s, or shorter, down to 1 s, so that the shorter run has about 10); " +
	"significant when p stays below 0.05 after Holm-Bonferroni correction over every row tested"

// Comparison is two recordings side by side: every statistic both runs can
// have, its change, and whether the change exceeds the noise between
// windows (see Rule).
type Comparison struct {
	Base, Other *Recording
	// Window is the length of the windows both runs were cut into, and
	// Windows how many whole ones each run has.
	Window  time.Duration
	Windows [2]int
	Changes []Change
	// Mismatches are how the runs differ in what they measured (target,
	// model, workload, latscope version): every format warns of them first.
	Mismatches []Mismatch
}

// Change is one statistic of the two runs. Values are whole-run figures;
// the test runs on the statistic's per-window values.
type Change struct {
	Section string // latency, client stage, breakdown, throughput, server
	Name    string // e.g. ttft, queue, ok_per_s
	Stat    string // mean, p50, p99, or value for a rate
	Unit    string // ms, req/s, tok/s, %, requests
	// Base and Other are the whole-run values; NaN when a run has none.
	Base, Other float64
	// Delta is Other − Base; DeltaPct is Delta as a percentage of Base
	// (NaN when Base is 0 or missing).
	Delta, DeltaPct float64
	// Windows counts the per-window values the test used in each run.
	Windows [2]int
	// P is the test's p-value, NaN when it could not run (fewer than two
	// windows with a value in either run).
	P           float64
	Significant bool
}

// Tested reports whether the test could run.
func (c Change) Tested() bool { return !math.IsNaN(c.P) }

// Untested says why the test could not run ("" when it did).
func (c Change) Untested() string {
	switch {
	case c.Tested():
		return ""
	case c.Windows[0] < 2 || c.Windows[1] < 2:
		return "fewer than 2 windows"
	}
	return "constant in every window of both runs (an estimate made once per run): no noise to judge the change by"
}

// Compare compares other with base. It reads both files once more, to cut
// them into windows.
func Compare(base, other *Recording) (*Comparison, error) {
	return CompareContext(context.Background(), base, other)
}

// CompareContext is Compare, which stops reading when ctx ends.
func CompareContext(ctx context.Context, base, other *Recording) (*Comparison, error) {
	cmp := &Comparison{Base: base, Other: other, Window: windowLength(base, other),
		Mismatches: mismatches(base.Summary.Session, other.Summary.Session)}
	wa, err := windowsOf(ctx, base, cmp.Window)
	if err != nil {
		return nil, err
	}
	wb, err := windowsOf(ctx, other, cmp.Window)
	if err != nil {
		return nil, err
	}
	cmp.Windows = [2]int{len(wa), len(wb)}
	qs := quantities(&base.Summary, &other.Summary)
	ps := make([]float64, len(qs))
	for i, q := range qs {
		ch := Change{Section: q.section, Name: q.name, Stat: q.stat, Unit: q.unit,
			Base: math.NaN(), Other: math.NaN(), DeltaPct: math.NaN()}
		if v, ok := q.run(&base.Summary); ok {
			ch.Base = v
		}
		if v, ok := q.run(&other.Summary); ok {
			ch.Other = v
		}
		ch.Delta = ch.Other - ch.Base
		if ch.Base != 0 && !math.IsNaN(ch.Delta) {
			ch.DeltaPct = 100 * ch.Delta / math.Abs(ch.Base)
		}
		xs, ys := perWindow(wa, q.window), perWindow(wb, q.window)
		ch.Windows = [2]int{len(xs), len(ys)}
		ch.P, _ = stats.Welch(xs, ys)
		ps[i] = ch.P
		cmp.Changes = append(cmp.Changes, ch)
	}
	for i, sig := range stats.Holm(ps, Alpha) {
		cmp.Changes[i].Significant = sig
	}
	return cmp, nil
}

// Significant returns the changes that are.
func (c *Comparison) Significant() []Change {
	var out []Change
	for _, ch := range c.Changes {
		if ch.Significant {
			out = append(out, ch)
		}
	}
	return out
}

func perWindow(ws []window, value func(*window) (float64, bool)) []float64 {
	var out []float64
	for i := range ws {
		if v, ok := value(&ws[i]); ok {
			out = append(out, v)
		}
	}
	return out
}

// quantity is one comparable statistic: how to read it from a whole run and
// from one window. Most read a window's summary as they read the run's.
type quantity struct {
	section, name, stat, unit string
	run                       func(*aggregate.Summary) (float64, bool)
	window                    func(*window) (float64, bool)
}

func sameInWindow(run func(*aggregate.Summary) (float64, bool)) func(*window) (float64, bool) {
	return func(w *window) (float64, bool) { return run(&w.Summary) }
}

// quantities lists what two runs are compared on: the latency metrics, the
// client and breakdown stages either run has, throughput and errors, and
// the server's queue depth and stage means.
func quantities(a, b *aggregate.Summary) []quantity {
	var qs []quantity
	stats := func(section, name, unit string, of func(*aggregate.Summary) aggregate.Stats, names ...string) {
		for _, stat := range names {
			run := func(s *aggregate.Summary) (float64, bool) { return statOf(of(s), stat) }
			qs = append(qs, quantity{section: section, name: name, stat: stat, unit: unit, run: run, window: sameInWindow(run)})
		}
	}
	stats("latency", "ttft", "ms", func(s *aggregate.Summary) aggregate.Stats { return s.TTFT }, "mean", "p50", "p99")
	stats("latency", "itl", "ms", func(s *aggregate.Summary) aggregate.Stats { return s.ITL }, "mean", "p50", "p99")
	stats("latency", "tpot", "ms", func(s *aggregate.Summary) aggregate.Stats { return s.TPOT }, "mean", "p50", "p99")
	stats("latency", "e2e", "ms", func(s *aggregate.Summary) aggregate.Stats { return s.E2E }, "mean", "p50", "p99")
	stats("latency", "tok_per_s_per_request", "tok/s", func(s *aggregate.Summary) aggregate.Stats { return s.TokensPerSec }, "mean", "p50")
	if a.SchedLag.Max > 0 || b.SchedLag.Max > 0 { // the open loop was late at least once
		stats("latency", "sched_lag", "ms", func(s *aggregate.Summary) aggregate.Stats { return s.SchedLag }, "mean", "p99")
	}
	for _, st := range event.OrderStages(event.ClientOrder(), maps.Keys(a.Stages), maps.Keys(b.Stages)) {
		stats("client stage", string(st), "ms", func(s *aggregate.Summary) aggregate.Stats { return s.Stages[st] }, "mean", "p50", "p99")
	}
	for _, st := range event.OrderStages(event.BreakdownOrder(), maps.Keys(a.Breakdown.Stages), maps.Keys(b.Breakdown.Stages)) {
		stats("breakdown", string(st), "ms", func(s *aggregate.Summary) aggregate.Stats { return s.Breakdown.Stages[st].Stats }, "mean", "p50", "p99")
	}
	qs = append(qs, throughput()...)
	return append(qs, server(a, b)...)
}

func throughput() []quantity {
	errorRate := func(s *aggregate.Summary) (float64, bool) {
		rate, ok := s.Requests.ErrorRate()
		return 100 * rate, ok
	}
	return []quantity{
		{section: "throughput", name: "ok_per_s", stat: "value", unit: "req/s",
			run: func(s *aggregate.Summary) (float64, bool) { return s.Requests.OKPerSec, s.Requests.Duration > 0 },
			window: func(w *window) (float64, bool) {
				return float64(w.Requests.OK) / w.length.Seconds(), true
			}},
		{section: "throughput", name: "tok_per_s", stat: "value", unit: "tok/s",
			run: func(s *aggregate.Summary) (float64, bool) { return s.Requests.TokPerSec, s.Requests.Duration > 0 },
			window: func(w *window) (float64, bool) {
				return float64(w.Requests.TokensOut) / w.length.Seconds(), true
			}},
		{section: "throughput", name: "error_rate", stat: "value", unit: "%", run: errorRate, window: sameInWindow(errorRate)},
	}
}

func server(a, b *aggregate.Summary) []quantity {
	var qs []quantity
	if a.Server.QueueDepth.Seen || b.Server.QueueDepth.Seen {
		depth := func(s *aggregate.Summary) (float64, bool) { return s.Server.QueueDepth.Mean, s.Server.QueueDepth.Seen }
		qs = append(qs, quantity{section: "server", name: "queue_depth", stat: "mean", unit: "requests",
			run: depth, window: sameInWindow(depth)})
	}
	names := slices.Sorted(maps.Keys(a.Server.StageMeans))
	for _, k := range slices.Sorted(maps.Keys(b.Server.StageMeans)) {
		if _, ok := a.Server.StageMeans[k]; !ok {
			names = append(names, k)
		}
	}
	for _, name := range names {
		mean := func(s *aggregate.Summary) (float64, bool) { v, ok := s.Server.StageMeans[name]; return v, ok }
		qs = append(qs, quantity{section: "server", name: name, stat: "mean", unit: "ms", run: mean, window: sameInWindow(mean)})
	}
	return qs
}

// statOf reads one statistic; a metric with no values has none.
func statOf(s aggregate.Stats, stat string) (float64, bool) {
	if s.Count == 0 {
		return 0, false
	}
	switch stat {
	case "mean":
		return s.Mean, true
	case "p50":
		return s.P50, true
	case "p90":
		return s.P90, true
	case "p99":
		return s.P99, true
	case "max":
		return s.Max, true
	}
	return 0, false
}

func percent(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
