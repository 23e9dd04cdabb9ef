package aggregate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// cutReq is a request the run's end cancelled: sent at `at`, cut at end.
func cutReq(at, end time.Time, tokens int) *event.Request {
	return &event.Request{
		ID: "c", Intended: at, Start: at, Outcome: event.OutcomeCancelled, RunEnded: true,
		Error: "cancelled: interrupted by SIGINT", E2E: end.Sub(at), OutputTokens: tokens,
	}
}

// TestInterruptedRunCancelsAreNotErrors: a run a signal stopped with half
// its requests in flight (the headless demo's Ctrl-C of issue 24): the cut
// ones are cancelled, on every count the aggregator gives, never errors:
// not in the error rate, not an error burst, not against an error-rate
// objective or the goodput.
func TestInterruptedRunCancelsAreNotErrors(t *testing.T) {
	t.Parallel()
	slo, err := ParseSLO("errors.rate<1%,ttft.p99<1s")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{SLO: slo})
	t0 := base()
	for i := range 4 {
		addAll(a, okReq(t0.Add(time.Duration(i)*time.Second), 100*time.Millisecond, 10*time.Millisecond, 3))
	}
	interrupt := t0.Add(4*time.Second + 860*time.Millisecond)
	for i := range 4 {
		addAll(a, cutReq(t0.Add(4*time.Second+time.Duration(i)*100*time.Millisecond), interrupt, 2))
	}
	s := a.Summary()
	r := s.Requests
	if r.Sent != 8 || r.OK != 4 || r.Errors != 0 || r.CancelledAtEnd != 4 || len(r.ByOutcome) != 0 || len(r.TopErrors) != 0 {
		t.Fatalf("requests %+v: want 8 sent, 4 ok, 0 errors, 4 cancelled, no error kinds", r)
	}
	if rate, ok := r.ErrorRate(); !ok || rate != 0 {
		t.Errorf("error rate %v (%t), want 0 of 4 finished", rate, ok)
	}
	if bursts := markersOf(s, MarkerErrorBurst); len(bursts) != 0 {
		t.Errorf("error bursts %+v, want none: a cancelled request did not fail", bursts)
	}
	for _, res := range Evaluate(s, slo) {
		if !res.Pass {
			t.Errorf("objective %s: %s, want it met", res.Objective, res.GotText)
		}
	}
	if r.Good == nil || *r.Good != 4 {
		t.Errorf("goodput count %v, want the 4 that finished in time", r.Good)
	}
	var table, js bytes.Buffer
	if err := WriteTable(&table, s); err != nil {
		t.Fatal(err)
	}
	if want := "Requests: 8 sent, 4 ok, 0 errors (0.00%), 4 cancelled at the end of the run;"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
	if strings.Contains(table.String(), "Errors by kind") {
		t.Errorf("table lists error kinds for a run without errors:\n%s", table.String())
	}
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"errors": 0,`, `"cancelled_at_end": 4,`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	if line := StatusLine(a.Snapshot(a.Latest())); !strings.Contains(line, "errors 0 (0.0%)  cancelled 4") {
		t.Errorf("status line %q: want 0 errors and the 4 cancelled apart", line)
	}
}

// TestNoRequestFinished: a run whose every request was still in flight at
// its end (an open loop far past capacity, --drain 0s) lasted its
// duration, not 0 s, and finished nothing.
func TestNoRequestFinished(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	t0 := base()
	end := t0.Add(15 * time.Second)
	for i := range 30 {
		addAll(a, cutReq(t0.Add(time.Duration(i)*500*time.Millisecond), end, 1))
	}
	r := a.Summary().Requests
	if r.Sent != 30 || r.OK != 0 || r.Errors != 0 || r.CancelledAtEnd != 30 {
		t.Fatalf("requests %+v: want 30 sent, all cancelled at the end", r)
	}
	if r.Duration != 15*time.Second {
		t.Errorf("duration %v, want the run's 15s", r.Duration)
	}
	if r.ReqPerSec != 0 || r.OKPerSec != 0 || r.TokPerSec != 2 {
		t.Errorf("rates %v finished, %v ok, %v tok/s; want 0, 0 and the cut requests' 30 tokens over 15 s", r.ReqPerSec, r.OKPerSec, r.TokPerSec)
	}
	if _, ok := r.ErrorRate(); ok {
		t.Error("an error rate without a finished request")
	}
}
