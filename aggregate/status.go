package aggregate

import (
	"fmt"
	"time"
)

// StatusLine renders one line for stderr (about once a second in headless
// runs): elapsed time, requests in flight, request and token rates and TTFT
// p50/p99 over the last 10 s, and the run's errors.
func StatusLine(s Snapshot, inFlight int) string {
	w := s.Windows[Win10s]
	ttft := "TTFT -"
	if w.TTFT.Count > 0 {
		ttft = fmt.Sprintf("TTFT p50 %.2f ms p99 %.2f ms", w.TTFT.P50, w.TTFT.P99)
	}
	errs := fmt.Sprintf("errors %d", s.Requests.Errors)
	if s.Requests.Sent > 0 {
		errs += fmt.Sprintf(" (%.1f%%)", 100*float64(s.Requests.Errors)/float64(s.Requests.Sent))
	}
	return fmt.Sprintf("%s  in flight %d  %.1f req/s  %.0f tok/s  %s (10s)  %s",
		s.Elapsed.Truncate(time.Second), inFlight, w.ReqPerSec, w.TokPerSec, ttft, errs)
}
