//go:build acceptance

package aggregate_test

// Acceptance tier: five-turn conversations against the real-time
// simulator's prefix cache, large and then small enough to evict, judged
// against the simulator's own count of what its cache did.

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// convoRun is one conversation load's summary and the simulator's truth.
type convoRun struct {
	sum   aggregate.Summary
	truth sim.PrefixCacheTruth
	table string
}

// runConversations sends 8 sessions of 5 turns (each turn 200 new prompt
// tokens, 40 out), twice over, to a simulator whose prefix cache holds
// blocks blocks.
func runConversations(t *testing.T, blocks int) convoRun {
	t.Helper()
	url, srv := simtest.ServeServer(t, sim.Config{Profile: h100(t), Seed: 1, PrefixCacheBlocks: blocks})
	const sessions, turns = 8, 5
	res := runLoad(t, simClient(t, url, nil), probe.LoadConfig{Concurrency: sessions, Requests: 2 * sessions * turns,
		Conversation: probe.Conversation{Turns: turns}}, prompts(t, 200, 40, 1), nil)
	if res.stats.OK != 2*sessions*turns {
		t.Fatalf("cache %d blocks: ok %d of %d: %+v", blocks, res.stats.OK, 2*sessions*turns, res.stats.ByOutcome)
	}
	a := aggregate.New(aggregate.Config{})
	for _, r := range res.recs {
		a.Add(event.Event{Request: r})
	}
	run := convoRun{sum: a.Summary(), truth: srv.PrefixCacheTruth()}
	var b bytes.Buffer
	if err := aggregate.WriteTable(&b, run.sum); err != nil {
		t.Fatal(err)
	}
	run.table = b.String()
	tu := run.sum.Turns
	if tu == nil || len(tu.ByTurn) != turns {
		t.Fatalf("cache %d blocks: turns %+v", blocks, tu)
	}
	for _, r := range tu.ByTurn {
		t.Logf("cache %d blocks, turn %s: prompt %.0f, cached %.0f (%.0f%%), ttft p50 %.2f ms, %.4f ms per uncached token",
			blocks, r.Label, r.PromptTokens, r.CachedTokens, 100*r.CachedShare, r.TTFT.P50, r.TTFTPerUncached)
	}
	t.Logf("cache %d blocks: hit rate %.3f, truth %.3f (%d evictions)", blocks, tu.HitRate, run.truth.HitRate(), run.truth.Evictions)
	// The client's hit rate is the simulator's: every lookup was one of
	// these requests, and each reported what its lookup found.
	if math.Abs(tu.HitRate-run.truth.HitRate()) > 0.005 {
		t.Errorf("cache %d blocks: hit rate %.4f, the simulator's truth %.4f", blocks, tu.HitRate, run.truth.HitRate())
	}
	if !strings.Contains(run.table, "Prefix cache over time") || len(tu.Series) == 0 {
		t.Errorf("cache %d blocks: the report lacks the cache over time:\n%s", blocks, run.table)
	}
	return run
}

// A large cache: cached tokens rise with the turn and TTFT per uncached
// token stays flat from turn 2 (each turn computes only its new message
// and the last answer). A small one: it evicts (the simulator counts it),
// the hit rate falls from the second turn to the last and below the large
// cache's, and the last turn's TTFT rises above the large cache's.
func TestConversationPrefixCacheHitsAndEvictsWithTheSimulator(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing on the calibrated profile: not under -short or -race")
	}
	large := runConversations(t, 100_000)
	if large.truth.Evictions != 0 {
		t.Errorf("large cache evicted %d blocks", large.truth.Evictions)
	}
	rows := large.sum.Turns.ByTurn
	for i := 1; i < len(rows); i++ {
		if rows[i].CachedTokens <= rows[i-1].CachedTokens {
			t.Errorf("large cache: cached tokens turn %s %.0f not above turn %s %.0f", rows[i].Label, rows[i].CachedTokens, rows[i-1].Label, rows[i-1].CachedTokens)
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, r := range rows[1:] {
		lo, hi = min(lo, r.TTFTPerUncached), max(hi, r.TTFTPerUncached)
	}
	if hi > 1.5*lo {
		t.Errorf("large cache: TTFT per uncached token over turns 2-5 from %.4f to %.4f ms, want flat (within 1.5×)", lo, hi)
	}

	// 8 sessions of up to 75 blocks each do not fit in 150: from the
	// third turn on, LRU evicts a session's prefix before it comes back.
	small := runConversations(t, 150)
	if small.truth.Evictions == 0 {
		t.Fatalf("small cache evicted nothing: %+v", small.truth)
	}
	srows := small.sum.Turns.ByTurn
	if second, last := srows[1].CachedShare, srows[len(srows)-1].CachedShare; last >= second {
		t.Errorf("small cache: cached share at the last turn %.3f not below the second's %.3f", last, second)
	}
	if small.sum.Turns.HitRate >= large.sum.Turns.HitRate {
		t.Errorf("small cache hit rate %.3f not below the large one's %.3f", small.sum.Turns.HitRate, large.sum.Turns.HitRate)
	}
	if s, l := srows[len(srows)-1].TTFT.P50, rows[len(rows)-1].TTFT.P50; s <= l {
		t.Errorf("last turn's TTFT p50 %.2f ms with the small cache, not above %.2f ms with the large", s, l)
	}
}
