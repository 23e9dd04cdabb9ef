package probe

import (
	"slices"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// In the open loop the rate stays the rate of requests: each tick sends
// the next turn of the session whose think time has been over longest, or
// a new session's first. On the virtual clock the schedule is exact: a
// request every 10 ms, each taking 25 ms, 30 ms of think time, so session
// 1's second turn is the first tick at or after 55 ms (60 ms), and no
// session ever has two turns in flight.
func TestOpenLoopConversations(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		const think, delay = 30 * time.Millisecond, 25 * time.Millisecond
		d := &sleepDoer{delay: delay}
		r, err := NewRunner(d, LoadConfig{Rate: 100, Arrival: ArrivalConstant, Requests: 40,
			Conversation: Conversation{Turns: 3, Think: think}}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		c := &runCollector{t: t}
		st := runLoadBounded(t, t.Context(), r, c)
		checkLoadAccounting(t, st, c)
		if st.Sent != 40 || st.OK != 40 {
			t.Fatalf("sent %d, ok %d, want 40 each", st.Sent, st.OK)
		}
		bySession := map[string][]*event.Request{}
		for _, rec := range c.reqs {
			bySession[rec.Session] = append(bySession[rec.Session], rec)
		}
		full := 0
		for id, rs := range bySession {
			slices.SortFunc(rs, func(a, b *event.Request) int { return a.Turn - b.Turn })
			for i, rec := range rs {
				if rec.Turn != i+1 {
					t.Fatalf("session %s: turn %d at place %d", id, rec.Turn, i)
				}
				if i == 0 {
					continue
				}
				prev := rs[i-1]
				if ready := prev.Start.Add(delay + think); rec.Intended.Before(ready) {
					t.Errorf("session %s turn %d due %v, before the last answer and the think time (%v)", id, rec.Turn, rec.Intended, ready)
				}
				if rec.PromptTokens <= prev.PromptTokens+prev.OutputTokens {
					t.Errorf("session %s turn %d: prompt %d tokens, not longer than turn %d's prompt and answer (%d + %d)",
						id, rec.Turn, rec.PromptTokens, prev.Turn, prev.PromptTokens, prev.OutputTokens)
				}
			}
			if len(rs) == 3 {
				full++
			}
		}
		// 40 requests at 10 ms: a session's turns are 60 ms apart, so
		// about six sessions are going at once, and most finish.
		if full < 8 || len(bySession) > 16 {
			t.Errorf("%d sessions, %d of them with all 3 turns: want at most 16 sessions and at least 8 full", len(bySession), full)
		}
		var first *event.Request
		for _, rec := range c.reqs {
			if rec.Seq == 0 {
				first = rec
			}
		}
		for _, rec := range bySession[first.Session] {
			if rec.Turn == 2 {
				if at := rec.Intended.Sub(first.Intended); at != 60*time.Millisecond {
					t.Errorf("the first session's second turn went %v after its first, want 60ms (the first tick after 25 + 30 ms)", at)
				}
			}
		}
	})
}

// A full pool of waiting sessions ends the newest session instead of
// holding more histories.
func TestChatPoolBounds(t *testing.T) {
	var p chatPool
	now := time.Unix(0, 0)
	for i := range maxWaitingChats {
		if !p.put(&chat{id: "s"}, now.Add(time.Duration(i))) {
			t.Fatalf("put %d refused", i)
		}
	}
	if p.put(&chat{id: "over"}, now) {
		t.Fatal("a session past the bound was kept")
	}
	if c := p.take(now.Add(-time.Nanosecond)); c != nil {
		t.Fatal("a session was taken before its time")
	}
	if c := p.take(now.Add(time.Hour)); c == nil {
		t.Fatal("no session ready an hour later")
	}
}
