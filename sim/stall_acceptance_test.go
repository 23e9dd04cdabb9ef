//go:build acceptance

package sim

// Acceptance tier (go test -tags acceptance -p 1): its bound is on how
// promptly the event loop flushes frames in real time, which a starved
// host decides rather than the simulator; see CONTRIBUTING.md.

import (
	"testing"
	"time"
)

// TestTokenizerPoolRemovesStall: with a tokenizer pool the loop keeps
// flushing frames while the long prompt tokenizes, so no stream waits
// anywhere near that long. The margin is wide: the tokenization is ~150 ms,
// a frame comes every millisecond or so.
func TestTokenizerPoolRemovesStall(t *testing.T) {
	// Not parallel: the bound is on the loop's promptness, so the loop
	// should not share the process with other tests' servers.
	run := stallScenario(t, 2)
	tok := time.Duration(run.long.TokenizeUs) * time.Microsecond
	if tok < 100*time.Millisecond {
		t.Fatalf("the long prompt tokenized in %v; the scenario needs a long one", tok)
	}
	for id, fl := range run.flushes {
		if g := maxGap(fl); g >= tok/2 {
			t.Errorf("%s: flush gap %v while a %v tokenization ran on the pool", id, g, tok)
		}
	}
}
