package probe_test

// The conversation load and the abandoned requests against the simulator
// over loopback. The assertions are counts and the simulator's own
// reports (cached tokens, the prompt's length), never how fast the host is.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// runLoadAt sends a closed-loop load of cfg through the real Runner and
// Client against url and returns the stats and every record.
func runLoadAt(t *testing.T, url string, cfg probe.LoadConfig, promptTokens, outputTokens int) (probe.RunStats, []*event.Request) {
	t.Helper()
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{
		PromptTokens: probe.Length{Mean: promptTokens}, OutputTokens: probe.Length{Mean: outputTokens}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, cfg, prompts)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*event.Request
	if err := runner.Run(ctx, func(ev event.Event) {
		if ev.Request != nil {
			recs = append(recs, ev.Request)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return runner.Stats(), recs
}

func TestConversationTurnsGrowAndHitThePrefixCache(t *testing.T) {
	url := startSim(t, sim.Config{Profile: tinyProfile(t), Seed: 1, PrefixCacheBlocks: 4096})
	const turns, sessions = 4, 2
	st, recs := runLoadAt(t, url, probe.LoadConfig{Concurrency: sessions, Requests: turns * sessions,
		Conversation: probe.Conversation{Turns: turns}}, 40, 12)
	if st.OK != turns*sessions {
		t.Fatalf("ok %d of %d: %+v", st.OK, turns*sessions, st.ByOutcome)
	}
	bySession := map[string][]*event.Request{}
	for _, r := range recs {
		bySession[r.Session] = append(bySession[r.Session], r)
	}
	// The workers share one count of requests: a fast one may begin a
	// new session while the other has turns left, so there are at least
	// as many sessions as workers, each with its turns in order.
	if len(bySession) < sessions {
		t.Fatalf("%d sessions, want at least %d", len(bySession), sessions)
	}
	for id, rs := range bySession {
		slices.SortFunc(rs, func(a, b *event.Request) int { return a.Turn - b.Turn })
		for i, r := range rs {
			if r.Turn != i+1 {
				t.Fatalf("session %s: turn %d at place %d", id, r.Turn, i)
			}
			cached := 0
			if r.Server != nil {
				cached = r.Server.CachedTokens
			}
			if i == 0 {
				if cached != 0 {
					t.Errorf("session %s turn 1: %d cached tokens, want none", id, cached)
				}
				continue
			}
			prev := rs[i-1]
			// The whole earlier prompt and answer are part of this one.
			if r.PromptTokens <= prev.PromptTokens+prev.OutputTokens {
				t.Errorf("session %s turn %d: prompt %d tokens, not longer than turn %d's prompt %d and answer %d",
					id, r.Turn, r.PromptTokens, prev.Turn, prev.PromptTokens, prev.OutputTokens)
			}
			// The earlier prompt's whole blocks are cached.
			if want := prev.PromptTokens / sim.PrefixBlockTokens * sim.PrefixBlockTokens; cached < want-sim.PrefixBlockTokens {
				t.Errorf("session %s turn %d: %d cached tokens, want at least %d (turn %d's prompt was %d)",
					id, r.Turn, cached, want-sim.PrefixBlockTokens, prev.Turn, prev.PromptTokens)
			}
		}
	}
}

func TestCancelAfterTokensAbandonsTheShareAsked(t *testing.T) {
	url := startSim(t, sim.Config{Profile: tinyProfile(t), Seed: 1})
	const n = 40
	st, recs := runLoadAt(t, url, probe.LoadConfig{Concurrency: 4, Requests: n, Seed: 3,
		Cancel: probe.CancelPolicy{Tokens: 4, Share: 0.5}}, 20, 32)
	if st.Errors != 0 || st.OK+st.Abandoned != n || st.Abandoned == 0 || st.OK == 0 {
		t.Fatalf("ok %d, abandoned %d, errors %d of %d: %+v", st.OK, st.Abandoned, st.Errors, n, st.ByOutcome)
	}
	for _, r := range recs {
		if !r.Abandoned() {
			continue
		}
		if r.Failed() || r.Abandon == nil || r.Abandon.Rule != "tokens=4" || r.Abandon.At < r.TTFT {
			t.Fatalf("abandoned record: failed %v, %+v, ttft %s", r.Failed(), r.Abandon, r.TTFT)
		}
		if r.OutputTokens != 4 {
			t.Errorf("abandoned after %d tokens, want 4", r.OutputTokens)
		}
	}
}

func TestCancelAfterTimeAbandonsBeforeTheEnd(t *testing.T) {
	url := startSim(t, sim.Config{Profile: tinyProfile(t), Seed: 1})
	// 4,000 tokens take the tiny profile seconds; the stop comes at 50 ms.
	// A host too slow to have sent the request by then still abandons it.
	st, recs := runLoadAt(t, url, probe.LoadConfig{Concurrency: 1, Requests: 2,
		Cancel: probe.CancelPolicy{After: 50 * time.Millisecond, Share: 1}}, 20, 4000)
	if st.Abandoned != 2 || st.Errors != 0 {
		t.Fatalf("abandoned %d, errors %d: %+v", st.Abandoned, st.Errors, st.ByOutcome)
	}
	for _, r := range recs {
		if r.Abandon == nil || r.Abandon.At < 50*time.Millisecond || r.OutputTokens >= 4000 {
			t.Fatalf("%+v after %d tokens", r.Abandon, r.OutputTokens)
		}
	}
}

func TestParseConversationAndCancelAfter(t *testing.T) {
	c, err := probe.ParseConversation("turns=5,think=2s")
	if err != nil || c.Turns != 5 || c.Think != 2*time.Second {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"", "turns=0", "turns=x", "think=1s", "turns=3,think=-1s", "turns=3,x=1", "turns=100000"} {
		if _, err := probe.ParseConversation(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	p, err := probe.ParseCancelAfter("tokens=8,share=0.5")
	if err != nil || p.Tokens != 8 || p.Share != 0.5 {
		t.Fatalf("%+v %v", p, err)
	}
	if p, err := probe.ParseCancelAfter("time=2s"); err != nil || p.After != 2*time.Second || p.Share != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	for _, bad := range []string{"", "tokens=0", "time=0s", "tokens=8,time=1s", "share=0.5", "tokens=8,share=0", "tokens=8,share=1.5", "tokens=8,share=NaN", "x=1"} {
		if _, err := probe.ParseCancelAfter(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
