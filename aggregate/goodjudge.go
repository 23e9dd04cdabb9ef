package aggregate

import "github.com/latscope/latscope/event"

// GoodRequest returns the goodput's rule for one request under objectives:
// whether it succeeded and met every per-request latency limit. It is nil
// when the objectives set no such limit, so that a caller counting good
// requests (the agent's /metrics) counts none rather than calling every
// successful request good.
func GoodRequest(objectives []Objective, basis TTFTBasis) func(*event.Request) bool {
	l := limitsFrom(objectives, basis)
	if !l.set {
		return nil
	}
	return l.good
}
