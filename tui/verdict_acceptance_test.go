//go:build acceptance

package tui

import (
	"testing"

	"github.com/latscope/latscope/aggregate"
)

// On a host that keeps pace, the calm demo run keeps pace on every surface.
func TestProbeVerdictCalmDemoKeptPace(t *testing.T) {
	s := demoRun(t, calm)
	if s.Verdict.State != aggregate.ProbeKeptPace {
		t.Fatalf("verdict %s: %s (the host did not keep pace with the simulator)", s.Verdict.State, s.Verdict.Reason)
	}
	checkProbeSurfaces(t, s)
}
