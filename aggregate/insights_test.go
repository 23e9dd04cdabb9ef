package aggregate

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// withBreakdown builds n requests of 100 ms TTFT split as given.
func withBreakdown(a *Aggregator, n int, split map[event.Stage]time.Duration) {
	for i := 0; i < n; i++ {
		r := okReq(base().Add(time.Duration(i)*time.Millisecond), 100*time.Millisecond, 0, 1)
		for st, d := range split {
			r.Breakdown = append(r.Breakdown, event.StageTiming{Stage: st, Duration: d, Provenance: event.ServerReported})
		}
		addAll(a, r)
	}
}

// insightWith returns the insight whose message starts with prefix.
func insightWith(ins []event.Marker, prefix string) (event.Marker, bool) {
	for _, m := range ins {
		if strings.HasPrefix(m.Message, prefix) {
			return m, true
		}
	}
	return event.Marker{}, false
}

func TestBreakdownInsights(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name  string
		n     int
		split map[event.Stage]time.Duration
		want  []string // message prefixes that must appear
		not   []string // and that must not
	}{
		{
			name:  "queue dominates",
			n:     20,
			split: map[event.Stage]time.Duration{event.StageQueue: 60 * ms, event.StagePrefill: 30 * ms, event.StageUnattributed: 10 * ms},
			want:  []string{"queue wait is 60% of TTFT (mean, whole run; from the breakdown; queue is server-reported)"},
			not:   []string{"non-model overhead", "tokenization"},
		},
		{
			name:  "small queue",
			n:     20,
			split: map[event.Stage]time.Duration{event.StageQueue: 10 * ms, event.StagePrefill: 85 * ms, event.StageFirstDecode: 5 * ms},
			not:   []string{"queue wait", "non-model overhead"},
		},
		{
			name: "tokenize and overhead",
			n:    20,
			split: map[event.Stage]time.Duration{
				event.StageNetworkOut: 20 * ms, event.StageTokenize: 10 * ms, event.StageQueue: 20 * ms,
				event.StagePrefill: 40 * ms, event.StageUnattributed: 10 * ms,
			},
			want: []string{"tokenization is 25% of prefill (mean, whole run; prefill server-reported)", "non-model overhead is 30% of TTFT (mean, whole run;"},
			not:  []string{"queue wait"},
		},
		{
			name:  "too few requests",
			n:     insightMinRequests - 1,
			split: map[event.Stage]time.Duration{event.StageQueue: 90 * ms, event.StageTokenize: 10 * ms, event.StagePrefill: 10 * ms},
			not:   []string{"queue wait", "tokenization", "non-model overhead"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := New(Config{})
			withBreakdown(a, tc.n, tc.split)
			ins := a.Summary().Insights
			for _, w := range tc.want {
				m, ok := insightWith(ins, w)
				if !ok {
					t.Errorf("missing insight %q in %v", w, ins)
					continue
				}
				if m.Kind != event.MarkerInsight || len(m.Values) == 0 {
					t.Errorf("insight %q: kind %q values %v", w, m.Kind, m.Values)
				}
			}
			for _, n := range tc.not {
				if m, ok := insightWith(ins, n); ok {
					t.Errorf("unexpected insight %q", m.Message)
				}
			}
		})
	}
}

func TestQueueShareFromServerMetrics(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	for i := 0; i < 12; i++ {
		addAll(a, okReq(base(), 100*time.Millisecond, 0, 1))
	}
	a.Add(event.NewServer(&event.ServerSample{Time: base(), Stages: map[string]event.HistStat{
		"queue": {Count: 12, Mean: 50 * time.Millisecond},
	}}))
	m, ok := insightWith(a.Summary().Insights, "queue wait is 50% of TTFT (mean, whole run: server queue-time mean")
	if !ok || m.Values["from_breakdown"] != 0 || m.Values["share"] != 0.5 {
		t.Errorf("server-based queue insight = %+v (found %t)", m, ok)
	}
}

// loadWithQueue feeds 90 s of load: a server sample each second whose queue
// depth follows depth(i), and done(i) requests completing each second with
// TTFT that follows the queue.
func loadWithQueue(a *Aggregator, depth func(i int) float64, done func(i int) int, lag time.Duration) {
	t0 := base()
	for i := 0; i < 90; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		q := depth(i)
		a.Add(event.NewServer(&event.ServerSample{Time: at, Waiting: ptr(q)}))
		for j := 0; j < done(i); j++ {
			r := okReq(at, time.Duration(10+q)*time.Millisecond, 0, 1)
			r.SchedLag = lag
			addAll(a, r)
		}
	}
}

func TestGrowthAndLimitInsights(t *testing.T) {
	t.Parallel()
	rising := func(i int) float64 { return float64(i) }
	flat := func(int) float64 { return 5 }
	tests := []struct {
		name    string
		offered float64
		depth   func(int) float64
		done    func(int) int
		lag     time.Duration
		want    []string
		not     []string
	}{
		{
			name: "overload", offered: 10, depth: rising, done: func(int) int { return 2 },
			want: []string{"arrival rate exceeds completions", "the server, not the probe, is the limit"},
			not:  []string{"the probe is the limit"},
		},
		{
			name: "keeping up", offered: 2, depth: flat, done: func(int) int { return 2 },
			not: []string{"arrival rate exceeds completions", "the server, not the probe", "the probe is the limit"},
		},
		{
			name: "rising queue but arrivals match", offered: 2, depth: rising, done: func(int) int { return 2 },
			want: []string{"the server, not the probe, is the limit"},
			not:  []string{"arrival rate exceeds completions"},
		},
		{
			name: "late probe", offered: 2, depth: rising, done: func(int) int { return 2 }, lag: 40 * time.Millisecond,
			want: []string{"the probe is the limit"},
			not:  []string{"the server, not the probe"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := New(Config{OfferedRate: tc.offered})
			loadWithQueue(a, tc.depth, tc.done, tc.lag)
			ins := a.Snapshot(base().Add(90 * time.Second)).Insights
			for _, w := range tc.want {
				if _, ok := insightWith(ins, w); !ok {
					t.Errorf("missing insight %q in %v", w, ins)
				}
			}
			for _, n := range tc.not {
				if m, ok := insightWith(ins, n); ok {
					t.Errorf("unexpected insight %q", m.Message)
				}
			}
		})
	}
}

func TestNoInsightsWithoutInputs(t *testing.T) {
	t.Parallel()
	a := New(Config{OfferedRate: 100})
	if ins := a.Summary().Insights; len(ins) != 0 {
		t.Errorf("insights on an empty run: %v", ins)
	}
	addAll(a, okReq(base(), time.Second, 0, 1))
	if ins := a.Summary().Insights; len(ins) != 0 {
		t.Errorf("insights from one request: %v", ins)
	}
}

func TestPromptCacheInsight(t *testing.T) {
	t.Parallel()
	const prefix = "50% of requests were served largely from the server's prompt cache: their prefill is not a cold prefill"
	for _, tc := range []struct {
		name          string
		n, cached     int
		want, wantNot string
	}{
		{"half cached", 20, 10, prefix, ""},
		{"a few cached", 100, 4, "", "prompt cache"},
		{"too few requests", insightMinRequests - 1, insightMinRequests - 1, "", "prompt cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := New(Config{})
			for i := range tc.n {
				r := okReq(base().Add(time.Duration(i)*time.Millisecond), 100*time.Millisecond, 0, 1)
				if i < tc.cached {
					r.Flags = append(r.Flags, event.FlagPromptCached)
				}
				addAll(a, r)
			}
			s := a.Summary()
			if got := s.Requests.Flags[event.FlagPromptCached]; got != int64(tc.cached) {
				t.Errorf("prompt_cached counted %d times, want %d", got, tc.cached)
			}
			if tc.want != "" {
				m, ok := insightWith(s.Insights, tc.want)
				if !ok {
					t.Fatalf("no insight %q in %v", tc.want, s.Insights)
				}
				if m.Values["share"] != 0.5 || m.Values["requests"] != float64(tc.cached) {
					t.Errorf("values %v", m.Values)
				}
			}
			for _, m := range s.Insights {
				if tc.wantNot != "" && strings.Contains(m.Message, tc.wantNot) {
					t.Errorf("unexpected insight %q", m.Message)
				}
			}
		})
	}
}

// TestNoQueueInsightFromServerWait: a breakdown with a server wait (front
// end and queue, not told apart) and no queue speaks of no queue wait, not
// even when the server's queue-time mean is large, and the server wait is
// not counted as overhead.
func TestNoQueueInsightFromServerWait(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	a := New(Config{})
	a.Add(event.NewServer(&event.ServerSample{Time: base(), Stages: map[string]event.HistStat{
		"queue": {Count: 20, Mean: 60 * ms},
	}}))
	withBreakdown(a, 20, map[event.Stage]time.Duration{event.StageServerWait: 60 * ms, event.StagePrefill: 40 * ms})
	for _, m := range a.Summary().Insights {
		if strings.Contains(m.Message, "queue wait") || strings.HasPrefix(m.Message, "non-model overhead") {
			t.Errorf("insight %q from a breakdown without a queue", m.Message)
		}
	}
}
