//go:build acceptance

package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// Figures inside a statement's words, as the insights and markers write them.
var (
	percentIn   = regexp.MustCompile(`(\d+(?:\.\d+)?)%`)
	pauseIn     = regexp.MustCompile(`paused together for (\d+(?:\.\d+)?) ms`)
	streamsIn   = regexp.MustCompile(`(\d+) streams`)
	inPrefillIn = regexp.MustCompile(`(\d+) requests? may have been in prefill`)
	minSharedMS = 1.0 // the stall detector's floor on the pause a marker states
)

// TestStatementsStayWithinTheirBounds runs the demo, the overloaded demo
// and long prompts against a simulator that tokenizes on its event loop,
// and reads every insight and recent marker of each summary: none states
// a share above 100%, a shared pause under the stall
// detector's 1 ms floor, or more streams or requests than were in flight.
// Real time against the simulator: the acceptance tier.
func TestStatementsStayWithinTheirBounds(t *testing.T) {
	url := simtest.Serve(t, sim.Config{}) // TokenizerPool 0: on the loop
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"demo", []string{"demo", "--no-tui", "--duration", "15s", "--json"}},
		{"overloaded demo", []string{"demo", "--profile", "tiny", "--rate", "200", "--no-tui", "--duration", "10s", "--json"}},
		{"30,000-token prompts, tokenizer on the loop", []string{"run", "--url", url, "-c", "8", "--prompt-tokens", "30000",
			"--output-tokens", "64", "--duration", "15s", "--no-tui", "--no-gpu", "--json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := execute(t, tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var s aggregate.Summary
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, out)
			}
			inFlight := maxInFlight(s)
			statements := append(append([]event.Marker(nil), s.Insights...), s.Markers.Recent...)
			for _, m := range statements {
				checkStatement(t, m.Message, inFlight)
			}
			t.Logf("%d statements checked; at most %d in flight; verdict %s", len(statements), inFlight, s.Verdict.State)
		})
	}
}

// maxInFlight is the most requests the run can have had in flight: its
// concurrency in closed loop (the demo's steps reach 16), else the most
// the server held, running and waiting.
func maxInFlight(s aggregate.Summary) int {
	n := int(s.Server.Running.Peak + s.Server.QueueDepth.Peak)
	if h := s.Session; h != nil {
		n = max(n, h.Load.Concurrency)
		if h.Load.Steps != "" {
			n = max(n, 16)
		}
	}
	return n
}

func checkStatement(t *testing.T, msg string, inFlight int) {
	t.Helper()
	for _, m := range percentIn.FindAllStringSubmatch(msg, -1) {
		if v, _ := strconv.ParseFloat(m[1], 64); v > 100 { // a ratio beyond the whole is said as a multiple
			t.Errorf("a share above 100%%: %s", msg)
		}
	}
	for _, m := range pauseIn.FindAllStringSubmatch(msg, -1) {
		if v, _ := strconv.ParseFloat(m[1], 64); v < minSharedMS {
			t.Errorf("a pause under the %.0f ms floor: %s", minSharedMS, msg)
		}
	}
	for _, re := range []*regexp.Regexp{streamsIn, inPrefillIn} {
		for _, m := range re.FindAllStringSubmatch(msg, -1) {
			if v, _ := strconv.Atoi(m[1]); inFlight > 0 && v > inFlight {
				t.Errorf("%d counted, but at most %d were in flight: %s", v, inFlight, msg)
			}
		}
	}
}
