package aggregate

import (
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// Goodput is the rate of requests that met every latency objective, as vLLM's
// benchmark and GenAI-Perf define it: an objective's limit applies to each
// request's own value (its TTFT, its TPOT, its E2E, its mean inter-token
// gap), whatever statistic the objective names for the run, and a failed
// request is never good. errors.rate and requests.ok are run-level and play
// no part per request.

// requestLimit is one objective's limit on each request's own value.
type requestLimit struct {
	metric string // ttft, itl, tpot, e2e
	us     float64
	strict bool // "<" rather than "<="
}

// requestLimits are the per-request limits taken from the objectives.
type requestLimits struct {
	limits []requestLimit
	set    bool
	basis  TTFTBasis // which first token a ttft limit applies to
}

func limitsFrom(objectives []Objective, basis TTFTBasis) requestLimits {
	l := requestLimits{basis: basis}
	for _, o := range objectives {
		metric, _, _ := strings.Cut(o.Metric, ".")
		if !sloLatencyMetric(metric) || o.Op != "<" && o.Op != "<=" {
			continue
		}
		l.limits = append(l.limits, requestLimit{metric: metric, us: o.Value * 1000, strict: o.Op == "<"})
		l.set = true
	}
	return l
}

// good reports whether r met every per-request limit.
func (l requestLimits) good(r *event.Request) bool {
	if !r.OK() {
		return false
	}
	for _, lim := range l.limits {
		var d time.Duration
		switch lim.metric {
		case "ttft":
			var ok bool
			if d, ok = ttftOf(l.basis, r); !ok {
				return false // no answer (or no token) is no good
			}
		case "e2e":
			d = r.E2E
		case "tpot":
			d = r.TPOT()
		case "itl":
			d = meanITL(r)
		}
		v := float64(d) / float64(time.Microsecond)
		if v > lim.us || lim.strict && v == lim.us {
			return false
		}
	}
	return true
}

// meanITL is the request's mean gap between content chunks.
func meanITL(r *event.Request) time.Duration {
	if len(r.Chunks) < 2 {
		return 0
	}
	return (r.Chunks[len(r.Chunks)-1].At - r.Chunks[0].At) / time.Duration(len(r.Chunks)-1)
}
