package stall

import (
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// The same paused streams name a cause only where the server's design
// makes what was seen evidence of it: on a plain OpenAI-compatible server
// (a fake that only sleeps, a gateway) a burst of tokens or another
// request's first token at a pause's end is what was seen, and the pause
// is unexplained; on vLLM it is a front-end block or prefill interference.
// The server's own timing names the cause on any server.
func TestStallCausesNeedTheServersEvidence(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	timed := func(r *event.Request, stages map[event.Stage]time.Duration) *event.Request {
		r.Server = &event.ServerTiming{Source: "test", Stages: stages}
		return r
	}
	plain := Server{Kind: "openai"}
	tests := []struct {
		name      string
		recs      func() []*event.Request
		onVLLM    event.StallCause
		onPlain   event.StallCause
		plainSaid string // in the plain server's message
	}{
		{
			name:   "a burst of held tokens with no prefill possible",
			recs:   func() []*event.Request { return withBurst(fourPausing(30 * ms)) },
			onVLLM: event.StallFrontEndBlock, onPlain: event.StallUnexplained,
			plainSaid: "the tokens of the streams came in a burst when it ended",
		},
		{
			name: "a request's front-end window in it, then a burst",
			recs: func() []*event.Request {
				return append(withBurst(fourPausing(30*ms)), oneRequest("tok", 199*ms, 232*ms, 900*ms, 3))
			},
			onVLLM: event.StallFrontEndBlock, onPlain: event.StallUnexplained,
			plainSaid: "the server (openai) is not known to tokenize on the loop that writes its frames",
		},
		{
			name: "another request's first token ends it",
			recs: func() []*event.Request {
				return append(fourPausing(30*ms), oneRequest("new", 150*ms, 151*ms, 245*ms, 3))
			},
			onVLLM: event.StallPrefillInterference, onPlain: event.StallUnexplained,
			plainSaid: "seen: request new's first token came 10.0 ms after it (the server (openai) is not known to prefill",
		},
		{
			name: "the server's own timing of its tokenization",
			recs: func() []*event.Request {
				return append(withBurst(fourPausing(30*ms)),
					timed(oneRequest("tok", 199*ms, 200*ms, 900*ms, 3), map[event.Stage]time.Duration{event.StageTokenize: 30 * ms}))
			},
			onVLLM: event.StallFrontEndBlock, onPlain: event.StallFrontEndBlock,
			plainSaid: "the server's tokenization of request tok",
		},
		{
			name: "the server's own timing of a prefill",
			recs: func() []*event.Request {
				return append(fourPausing(30*ms),
					timed(oneRequest("pre", 150*ms, 151*ms, 400*ms, 3), map[event.Stage]time.Duration{event.StagePrefill: 250 * ms}))
			},
			onVLLM: event.StallPrefillInterference, onPlain: event.StallPrefillInterference,
			plainSaid: "the server's timing puts request pre's",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range []struct {
				srv  Server
				want event.StallCause
				said string
			}{{vllmLike, tt.onVLLM, ""}, {plain, tt.onPlain, tt.plainSaid}, {Server{}, tt.onPlain, ""}} {
				got := detectOn(t, c.srv, tt.recs())
				if len(got) != 1 {
					t.Fatalf("%q: got %d markers, want 1: %+v", c.srv.Kind, len(got), got)
				}
				if got[0].Cause != c.want || !strings.Contains(got[0].Message, c.said) {
					t.Errorf("server %q: marker %q (cause %s), want cause %s with %q", c.srv.Kind, got[0].Message, got[0].Cause, c.want, c.said)
				}
			}
		})
	}
}

// A prompt prefilled in the pause whose first token a long step after it
// delays (other queued prompts prefilled together) still ended the pause
// when it was the first content the server sent after it; while the
// streams kept streaming in between, a late first token shows nothing.
func TestStallLateFirstTokenWithNothingBetween(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	streams := func(n int) []*event.Request {
		var out []*event.Request
		for i := range 4 {
			out = append(out, stallStreamRec(string(rune('a'+i)), time.Duration(i)*ms, n, 10*ms, 200*ms, 30*ms))
		}
		return out
	}
	// Waiting for its first token since 101 ms; it came 80 ms after the
	// pause, eight normal gaps.
	waiter := func() *event.Request { return oneRequest("queued", 100*ms, 101*ms, 315*ms, 3) }
	got := detectOn(t, vllmLike, append(streams(21), waiter()))
	if len(got) != 1 || got[0].Cause != event.StallPrefillInterference || !strings.Contains(got[0].Message, "request queued's first token came") {
		t.Fatalf("streams that ended with the pause: markers %+v, want prefill interference closed by request queued", got)
	}
	got = detectOn(t, vllmLike, append(streams(40), waiter()))
	if len(got) != 1 || got[0].Cause != event.StallUnexplained {
		t.Fatalf("streams that kept streaming: markers %+v, want one unexplained pause", got)
	}
}
