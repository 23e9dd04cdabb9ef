package bench

import (
	"context"
	"testing"
	"time"
)

// TestAccuracyWithProbeAndSimulator runs the real parts: latscope's probe
// and the bare client against the in-process simulator, at a tiny size.
func TestAccuracyWithProbeAndSimulator(t *testing.T) {
	t.Parallel()
	cfg := AccuracyConfig{
		Profile: "tiny", Concurrency: []int{2}, Requests: 3, PromptTokens: 16, OutputTokens: 6,
		Timeout: 30 * time.Second, Clients: DefaultClients("bench-test"),
		StartServer: SimServer("tiny", "bench-test", 2),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := RunAccuracy(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lv := res.Levels[0]
	for _, c := range lv.Clients {
		if c.Requests != 3 || c.Failed != 0 || c.Mismatched != 0 || c.TTFT.N != 3 || c.ITL.N != 3*5 {
			t.Errorf("%s: %+v, want 3 requests, 6 frames each matched to the simulator's", c.Client, c)
		}
	}
	if lv.Ratio == nil || !lv.Ratio.TTFTMean.Valid() {
		t.Errorf("no probe/bare ratio: %+v", lv.Ratio)
	}
}

// TestThroughputWithProbe runs the probe and the bare client against the
// in-process fast server for a few thousand tokens.
func TestThroughputWithProbe(t *testing.T) {
	t.Parallel()
	cfg := ThroughputConfig{
		Concurrency: []int{4}, TokensPerWrite: []int{16}, OutputTokens: 200, Tokens: 2000, Rounds: 1,
		Clients: DefaultClients("m"), StartServer: InProcessServer(),
	}
	res, err := RunThroughput(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cases[0]
	for _, cl := range c.Clients {
		if cl.Events != 2000 || cl.Failed != 0 || cl.EventsPerSec <= 0 || cl.AllocBytesPerToken <= 0 {
			t.Errorf("%s: %+v, want 2000 events, none failed, positive rates", cl.Client, cl)
		}
	}
	if c.Ratio == nil || len(c.Checks) != 3 {
		t.Errorf("ratio %+v checks %v", c.Ratio, c.Checks)
	}
}
