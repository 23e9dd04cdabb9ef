package probe

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// pauseLog replaces a Runner's pause: it records every pause and the
// requests around it in order, and returns at once, so tests never sleep.
type pauseLog struct {
	mu     sync.Mutex
	pauses []time.Duration
	steps  []string // "do" and "pause", in the order they happened
}

func (l *pauseLog) pause(_ context.Context, d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pauses = append(l.pauses, d)
	l.steps = append(l.steps, "pause")
	return true
}

func (l *pauseLog) step(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, s)
}

// scriptDoer ends request seq with outcomes[seq%len], logging each call.
type scriptDoer struct {
	outcomes []event.Outcome
	log      *pauseLog
}

func (d *scriptDoer) Do(_ context.Context, spec RequestSpec) *event.Request {
	d.log.step("do")
	now := time.Now()
	return &event.Request{ID: spec.ID, Seq: spec.Seq, Start: now, Intended: now, E2E: time.Millisecond,
		Outcome: d.outcomes[int(spec.Seq)%len(d.outcomes)]}
}

func refusedURL(t *testing.T) string {
	t.Helper()
	return "http://" + refusedAddr
}

// refusedAddr is a loopback address nothing listens on: port 1 is never
// handed out as an ephemeral port, so no other test's server can take it
// (a port opened and closed here could be).
const refusedAddr = "127.0.0.1:1"

// runPaused runs cfg through d with the pauses logged instead of taken.
func runPaused(t *testing.T, d Doer, cfg LoadConfig) (RunStats, *runCollector, *pauseLog, *Runner) {
	t.Helper()
	r, err := NewRunner(d, cfg, loadTestPrompts(t))
	if err != nil {
		t.Fatal(err)
	}
	log := &pauseLog{}
	r.pause = log.pause
	c := &runCollector{t: t}
	st := runLoadBounded(t, t.Context(), r, c)
	checkLoadAccounting(t, st, c)
	return st, c, log, r
}

// TestBackoffOnRefusedPort: a closed loop against a refused port pauses
// between requests, doubling from BackoffFirst up to BackoffMax with
// jitter, and counts the pauses.
func TestBackoffOnRefusedPort(t *testing.T) {
	t.Parallel()
	c := newWireClient(t, refusedURL(t), DialectOpenAIChat, nil)
	const n = 10
	st, col, log, r := runPaused(t, c, LoadConfig{Concurrency: 1, Requests: n, Seed: 1})
	if st.ByOutcome[event.OutcomeConnect] != n {
		t.Fatalf("outcomes %v, want %d connect", st.ByOutcome, n)
	}
	if len(log.pauses) != n-1 || st.Backoffs != n-1 || r.probeSample(time.Now()).Backoffs != n-1 {
		t.Fatalf("%d pauses, stats say %d: want one between each pair of the %d requests", len(log.pauses), st.Backoffs, n)
	}
	for i, got := range log.pauses {
		full := min(BackoffFirst<<i, BackoffMax)
		if got < full/2 || got > full {
			t.Errorf("pause %d: %v, want %v to %v", i, got, full/2, full)
		}
	}
	for _, rec := range col.reqs {
		if !rec.Intended.Equal(rec.Start) || rec.SchedLag != 0 {
			t.Errorf("seq %d: intended %v, start %v: a pause must not be part of any request", rec.Seq, rec.Intended, rec.Start)
		}
	}
}

// TestBackoffResetsAndStaysBetweenRequests: the back-off starts over once a
// request reaches the server, and every pause lies between two requests.
func TestBackoffResetsAndStaysBetweenRequests(t *testing.T) {
	t.Parallel()
	log := &pauseLog{}
	c, h := event.OutcomeConnect, event.OutcomeHTTPStatus
	d := &scriptDoer{log: log, outcomes: []event.Outcome{c, c, c, event.OutcomeOK, c, h, c}}
	r, err := NewRunner(d, LoadConfig{Concurrency: 1, Requests: 7, Seed: 2}, loadTestPrompts(t))
	if err != nil {
		t.Fatal(err)
	}
	r.pause = log.pause
	col := &runCollector{t: t}
	runLoadBounded(t, t.Context(), r, col)
	// Pauses follow requests 0, 1, 2 (connect: 1st, 2nd, 3rd in a row),
	// 4 (connect after an ok: 1st again) and 6 is the last request.
	wantFull := []time.Duration{BackoffFirst, 2 * BackoffFirst, 4 * BackoffFirst, BackoffFirst}
	if len(log.pauses) != len(wantFull) {
		t.Fatalf("pauses %v, want %d", log.pauses, len(wantFull))
	}
	for i, full := range wantFull {
		if got := log.pauses[i]; got < full/2 || got > full {
			t.Errorf("pause %d: %v, want %v to %v", i, got, full/2, full)
		}
	}
	want := []string{"do", "pause", "do", "pause", "do", "pause", "do", "do", "pause", "do", "do"}
	if len(log.steps) != len(want) {
		t.Fatalf("steps %v, want %v", log.steps, want)
	}
	for i := range want {
		if log.steps[i] != want[i] {
			t.Fatalf("steps %v, want %v", log.steps, want)
		}
	}
}

// TestRetryAfterHonouredInClosedLoop: a 429 with Retry-After pauses the
// closed-loop worker for that long, capped at MaxRetryAfter.
func TestRetryAfterHonouredInClosedLoop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{{"7", 7 * time.Second}, {"3600", MaxRetryAfter}, {"", 0}} {
		srv := newWireServer(t, func(w http.ResponseWriter, r *http.Request) {
			if tc.header != "" {
				w.Header().Set("Retry-After", tc.header)
			}
			http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
		})
		c := newWireClient(t, srv.URL, DialectOpenAIChat, nil)
		st, _, log, _ := runPaused(t, c, LoadConfig{Concurrency: 1, Requests: 3})
		if st.ByOutcome[event.OutcomeHTTPStatus] != 3 {
			t.Fatalf("Retry-After %q: outcomes %v", tc.header, st.ByOutcome)
		}
		wantPauses := 2
		if tc.want == 0 {
			wantPauses = 0
		}
		if len(log.pauses) != wantPauses || st.Backoffs != wantPauses {
			t.Fatalf("Retry-After %q: pauses %v (stats %d), want %d of %v", tc.header, log.pauses, st.Backoffs, wantPauses, tc.want)
		}
		for _, got := range log.pauses {
			if got != tc.want {
				t.Errorf("Retry-After %q: paused %v, want %v", tc.header, got, tc.want)
			}
		}
	}
}

// TestOpenLoopNeverPauses: the open loop keeps its schedule against a
// refused port: no pause, and every request counts from its intended time.
func TestOpenLoopNeverPauses(t *testing.T) {
	t.Parallel()
	c := newWireClient(t, refusedURL(t), DialectOpenAIChat, nil)
	st, col, log, _ := runPaused(t, c, LoadConfig{Rate: 1000, Arrival: ArrivalConstant, Requests: 20})
	if len(log.pauses) != 0 || st.Backoffs != 0 || st.ByOutcome[event.OutcomeConnect] != 20 {
		t.Fatalf("pauses %v, stats %+v: want 20 connect errors and no pause", log.pauses, st)
	}
	var first time.Time
	for _, rec := range col.reqs {
		if rec.Seq == 0 {
			first = rec.Intended
		}
	}
	for _, rec := range col.reqs {
		if want := first.Add(time.Duration(rec.Seq) * time.Millisecond); !rec.Intended.Equal(want) {
			t.Errorf("seq %d intended at +%v, want +%v", rec.Seq, rec.Intended.Sub(first), want.Sub(first))
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                        0,
		"0":                       0,
		"-5":                      0,
		"12":                      12 * time.Second,
		"59":                      59 * time.Second,
		"61":                      MaxRetryAfter,
		"99999999999999999999999": MaxRetryAfter,
		"soon":                    0,
		now.Add(30 * time.Second).Format(http.TimeFormat): 30 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
		now.Add(time.Hour).Format(http.TimeFormat):        MaxRetryAfter,
	} {
		if got := parseRetryAfter(http.Header{"Retry-After": {v}}, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}
