package aggregate

import (
	"fmt"
	"strings"
	"time"
)

// StatusLine renders one line for stderr (about once a second in headless
// runs): elapsed time, requests in flight, request and token rates and TTFT
// p50/p99 over the last 10 s, the run's errors (and requests the run's end
// cancelled, apart, once there are any), and latscope's own CPU and
// scheduling lag, the probe's verdict (Snapshot.Verdict) when it was
// held, paused or the client host was saturated, and the client host's
// figures while it is busy, so a user sees at a glance whether latscope, not the server, is the
// bottleneck.
func StatusLine(s Snapshot) string {
	w := s.Windows[Win10s]
	ttft := "TTFT -"
	if w.TTFT.Count > 0 {
		ttft = fmt.Sprintf("TTFT p50 %.2f ms p99 %.2f ms", w.TTFT.P50, w.TTFT.P99)
	}
	ttft += answerStatus(s, w)
	errs := fmt.Sprintf("errors %d", s.Requests.Errors)
	if rate, ok := s.Requests.ErrorRate(); ok {
		errs += fmt.Sprintf(" (%.1f%%)", 100*rate)
	}
	if n := s.Requests.CancelledAtEnd; n > 0 {
		errs += fmt.Sprintf("  cancelled %d", n)
	}
	if n := s.Requests.Abandoned; n > 0 {
		errs += fmt.Sprintf("  abandoned %d", n)
	}
	inFlight, self := "", ""
	if p := s.Probe; p != nil {
		inFlight = fmt.Sprintf("  in flight %d", p.InFlight)
		if p.CPUPercent >= 0 {
			self += fmt.Sprintf("  latscope cpu %.0f%%", p.CPUPercent)
		}
		if p.LagSamples > 0 { // the probe times only scheduled sends
			self += fmt.Sprintf(" lag p99 %.1f ms", float64(p.SchedLagP99)/float64(time.Millisecond))
		}
	}
	// The probe's verdict is the aggregator's, as on every other surface.
	switch s.Verdict.State {
	case ProbeHeld:
		self += "  LATSCOPE IS THE LIMIT: " + s.Verdict.Reason
	case ProbePaused:
		self += "  latscope paused: " + s.Verdict.Reason
	case ProbeHostBusy:
		// Its head: the figures follow in the host line.
		head, _, _ := strings.Cut(s.Verdict.Reason, "; ")
		self += "  " + head
	}
	// The client host's figures, while its latest sample finds it busy.
	if HostBusyNow(s.Host) {
		self += "  " + s.Host.LatestLine()
		if s.Verdict.State != ProbeHostBusy {
			self += ": the client host is busy, timings include its delays"
		}
	}
	return fmt.Sprintf("%s%s  %.1f req/s  %.0f tok/s  %s (10s)  %s%s",
		s.Elapsed.Truncate(time.Second), inFlight, w.ReqPerSec, w.TokPerSec, ttft, errs, self)
}
