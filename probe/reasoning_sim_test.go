package probe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// Helpers for the reasoning tests against the real simulator; the default
// tier asserts counts only, the acceptance tier timing.

// frameLog records the simulator's flush time of every content frame, by
// request id.
type frameLog struct {
	mu     sync.Mutex
	frames map[string][]time.Time
}

func (l *frameLog) onFrame(f sim.FrameInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frames == nil {
		l.frames = make(map[string][]time.Time)
	}
	l.frames[f.RequestID] = append(l.frames[f.RequestID], f.At)
}

// reasoningSim serves a tiny-profile reasoning simulator whose frames are
// logged.
func reasoningSim(t *testing.T, tokens int, field string) (string, *frameLog) {
	t.Helper()
	log := &frameLog{}
	url := startSim(t, sim.Config{Profile: tinyProfile(t), Reasoning: sim.Reasoning{Tokens: tokens, Field: field}, OnFrame: log.onFrame})
	return url, log
}

// sendSequential sends n requests one after another and returns their
// records.
func sendSequential(t *testing.T, url, dialect string, n, outputTokens int) []*event.Request {
	t.Helper()
	c, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: dialect, Model: sim.DefaultModel, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	recs := make([]*event.Request, 0, n)
	for i := range n {
		spec := probe.RequestSpec{ID: dialect + "-" + string(rune('a'+i)), Prompt: "why is the sky blue", OutputTokens: outputTokens}
		recs = append(recs, c.Do(context.Background(), spec))
	}
	return recs
}

// Against the simulator, whatever the host's pace: every request ok, the
// reasoning deltas counted apart from the answer, whether a chat stream
// names them reasoning or reasoning_content, or the Responses API sends
// reasoning events.
func TestReasoningSimCounts(t *testing.T) {
	t.Parallel()
	const n, out = 6, 10
	for _, tc := range []struct{ dialect, field string }{
		{probe.DialectOpenAIChat, sim.ReasoningField},
		{probe.DialectOpenAIChat, sim.ReasoningContentField},
		{probe.DialectOpenAIResponses, ""},
	} {
		url, _ := reasoningSim(t, n, tc.field)
		for _, r := range sendSequential(t, url, tc.dialect, 3, out) {
			if !r.OK() {
				t.Fatalf("%s %s: outcome %s: %s", tc.dialect, tc.field, r.Outcome, r.Error)
			}
			if r.ReasoningTokens != n || r.OutputTokens != out || r.AnswerTokens() != out-n || len(r.Chunks) != out {
				t.Errorf("%s %s: reasoning %d, output %d, chunks %d; want %d, %d, %d",
					tc.dialect, tc.field, r.ReasoningTokens, r.OutputTokens, len(r.Chunks), n, out, out)
			}
			// The answer may arrive in the same read as the first
			// reasoning delta (coalesced), never before it.
			if r.TTFTAnswer < r.TTFT || r.TTFTAnswer == 0 || r.Thinking() != r.TTFTAnswer-r.TTFT || r.HasFlag(event.FlagMissingUsage) {
				t.Errorf("%s %s: ttft %v, answer %v, flags %v", tc.dialect, tc.field, r.TTFT, r.TTFTAnswer, r.Flags)
			}
		}
	}
}
