package probe_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// The Messages dialect against the simulator, whatever the host's pace:
// every request ok, the thinking deltas counted apart from the answer, the
// answer starting at the first text delta (so time to first answer token =
// TTFT + thinking, as for the OpenAI reasoning fields), the output tokens
// the usage's.
func TestAnthropicSimThinking(t *testing.T) {
	t.Parallel()
	const n, out = 6, 10
	url, _ := reasoningSim(t, n, "")
	for _, r := range sendSequential(t, url, probe.DialectAnthropicMessages, 3, out) {
		if !r.OK() {
			t.Fatalf("outcome %s: %s", r.Outcome, r.Error)
		}
		if r.ReasoningTokens != n || r.OutputTokens != out || r.AnswerTokens() != out-n || len(r.Chunks) != out {
			t.Errorf("reasoning %d, output %d, chunks %d; want %d, %d, %d", r.ReasoningTokens, r.OutputTokens, len(r.Chunks), n, out, out)
		}
		// The answer is chunk n's arrival (never before the first chunk's
		// boundary, which the stages may have pushed later).
		if want := r.SchedLag + max(r.Chunks[n].At, r.TTFT-r.SchedLag); r.TTFTAnswer != want || r.TTFTAnswer != r.TTFT+r.Thinking() {
			t.Errorf("ttft %v, answer %v (want %v), thinking %v", r.TTFT, r.TTFTAnswer, want, r.Thinking())
		}
		if r.HasFlag(event.FlagMissingUsage) || r.PromptTokens == 0 {
			t.Errorf("flags %v, prompt tokens %d", r.Flags, r.PromptTokens)
		}
	}
}

// The usage's prompt tokens and the prefix cache: the same long prompt
// twice, and the second time the simulator's cached tokens are the
// record's, and the prompt is as long as the simulator counted it.
func TestAnthropicSimPromptCache(t *testing.T) {
	t.Parallel()
	// The truth comes once the simulator has finished the request, which
	// may be after the client saw the stream's end.
	truths := make(chan sim.Truth, 2)
	url := startSim(t, sim.Config{Profile: tinyProfile(t), PrefixCacheBlocks: 64, OnFinish: func(tr sim.Truth) { truths <- tr }})
	c, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectAnthropicMessages, Model: sim.DefaultModel, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	prompt := strings.Repeat("word ", 200)
	for _, id := range []string{"cold", "warm"} {
		r := c.Do(context.Background(), probe.RequestSpec{ID: id, Prompt: prompt, OutputTokens: 4})
		if !r.OK() {
			t.Fatalf("%s: outcome %s: %s", id, r.Outcome, r.Error)
		}
		var tr sim.Truth
		select {
		case tr = <-truths:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no truth from the simulator", id)
		}
		cached := 0
		if r.Server != nil {
			cached = r.Server.CachedTokens
		}
		if r.PromptTokens != tr.PromptTokens || cached != tr.CachedTokens || id == "warm" && (cached == 0 || !r.HasFlag(event.FlagPromptCached)) {
			t.Errorf("%s: prompt %d, cached %d, flags %v; the simulator's truth: %d of %d cached",
				id, r.PromptTokens, cached, r.Flags, tr.CachedTokens, tr.PromptTokens)
		}
	}
}

// The simulator's faults, in the Messages API's shape, end in the right
// outcome with the server's words; and the simulator, which speaks both
// APIs, is detected as itself with the OpenAI dialect.
func TestAnthropicSimFaults(t *testing.T) {
	t.Parallel()
	url := startSim(t, sim.Config{Profile: tinyProfile(t)})
	for _, tc := range []struct {
		fault   string
		outcome event.Outcome
		msg     string
	}{
		{"status=529", event.OutcomeHTTPStatus, "http 529: injected fault: status 529"},
		{"error-after=3", event.OutcomeServerError, "server error event: api_error: Internal server error (injected fault)"},
		{"malformed-after=2", event.OutcomeMalformed, "malformed chunk: anthropic-messages"},
		{"reset-after=2", event.OutcomeStreamReset, ""},
	} {
		c, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectAnthropicMessages, Model: sim.DefaultModel,
			Headers: http.Header{sim.FaultHeader: {tc.fault}}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r := c.Do(context.Background(), probe.RequestSpec{ID: tc.fault, Prompt: "hi", OutputTokens: 8})
		c.CloseIdleConnections()
		if r.Outcome != tc.outcome || !strings.Contains(r.Error, tc.msg) {
			t.Errorf("%s: outcome %s, error %q; want %s, %q", tc.fault, r.Outcome, r.Error, tc.outcome, tc.msg)
		}
	}
	d, err := probe.Detect(context.Background(), probe.Endpoint{BaseURL: url})
	if err != nil || d.Server != probe.ServerLatscopeSim || d.Dialect != probe.DialectOpenAIChat {
		t.Errorf("detected %+v, %v; want the simulator with openai-chat", d, err)
	}
}
