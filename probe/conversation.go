package probe

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Conversation makes the load users in chat sessions: each session sends
// its turns in order, each turn's prompt the conversation so far (every
// earlier message, the answers as the model gave them) and a new user
// message, with Think between its turns. In the closed loop each worker
// is a user who begins another session after the last turn; in the open
// loop each scheduled request is the next turn of a session whose think
// time is over, or a new session's first (chatPool). Turns 0 means single
// requests, as without it.
type Conversation struct {
	Turns int
	Think time.Duration
}

// maxTurns bounds a session's turns: each turn's prompt holds every
// earlier one, so the prompts grow with the square of the turns.
const maxTurns = 1000

// ParseConversation reads --conversation: "turns=N[,think=D]".
func ParseConversation(s string) (Conversation, error) {
	var c Conversation
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return c, fmt.Errorf("conversation %q: want turns=N[,think=D]", s)
		}
		switch k {
		case "turns":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxTurns {
				return c, fmt.Errorf("conversation turns %q: want a whole number from 1 to %d", v, maxTurns)
			}
			c.Turns = n
		case "think":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return c, fmt.Errorf("conversation think %q: want a duration of 0 or more, e.g. 2s", v)
			}
			c.Think = d
		default:
			return c, fmt.Errorf("conversation %q: unknown key %q (want turns, think)", s, k)
		}
	}
	if c.Turns == 0 {
		return c, fmt.Errorf("conversation %q: turns=N is required", s)
	}
	return c, nil
}

// chat is one worker's session in progress.
type chat struct {
	id      string
	turn    int       // turns sent so far
	history []Message // the conversation so far
	tokens  int       // its estimated length in tokens
}

// nextTurn decorates spec, a fresh request, as the next turn of c.
func (c *chat) nextTurn(spec *RequestSpec) {
	c.turn++
	spec.History = c.history
	spec.Session, spec.Turn, spec.KeepAnswer = c.id, c.turn, true
	spec.PromptTokens += c.tokens
}

// answered appends a turn's message and the answer to the conversation.
// newTokens is the new message's estimated length, outputTokens the
// answer's.
func (c *chat) answered(spec RequestSpec, newTokens, outputTokens int, answer string) {
	c.history = append(c.history[:len(c.history):len(c.history)],
		Message{Role: "user", Content: spec.Prompt}, Message{Role: "assistant", Content: answer})
	c.tokens += newTokens + max(outputTokens, 0)
}

// CancelPolicy abandons a share of the requests on purpose, as users who
// press stop: after Tokens output tokens, or After from the request's due
// time. The zero value abandons none.
type CancelPolicy struct {
	Tokens int
	After  time.Duration
	Share  float64 // of the requests, 0 to 1 (ParseCancelAfter's default: 1)
}

// Active reports whether p abandons any request.
func (p CancelPolicy) Active() bool { return (p.Tokens > 0 || p.After > 0) && p.Share > 0 }

// ParseCancelAfter reads --cancel-after: "tokens=N" or "time=D", and
// optionally ",share=S" (0 to 1, default 1: every request).
func ParseCancelAfter(s string) (CancelPolicy, error) {
	p := CancelPolicy{Share: 1}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return p, fmt.Errorf("cancel-after %q: want tokens=N or time=D, then ,share=S", s)
		}
		if err := p.set(k, v); err != nil {
			return p, fmt.Errorf("cancel-after %q: %w", s, err)
		}
	}
	switch {
	case p.Tokens == 0 && p.After == 0:
		return p, fmt.Errorf("cancel-after %q: give tokens=N or time=D", s)
	case p.Tokens > 0 && p.After > 0:
		return p, fmt.Errorf("cancel-after %q: give tokens=N or time=D, not both", s)
	}
	return p, nil
}

func (p *CancelPolicy) set(k, v string) error {
	switch k {
	case "tokens":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTokenLength {
			return fmt.Errorf("tokens %q: want a whole number from 1 to %d", v, maxTokenLength)
		}
		p.Tokens = n
	case "time":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("time %q: want a positive duration, e.g. 2s", v)
		}
		p.After = d
	case "share":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return fmt.Errorf("share %q: want a number above 0 and at most 1", v)
		}
		p.Share = f
	default:
		return fmt.Errorf("unknown key %q (want tokens, time, share)", k)
	}
	return nil
}

// picks reports whether request seq of a run with seed is one to abandon:
// a fixed draw per request, so a seed repeats the choice.
func (p CancelPolicy) picks(seed int64, seq uint64) bool {
	if !p.Active() {
		return false
	}
	z := uint64(seed) + (seq+1)*0x9e3779b97f4a7c15 // splitmix64
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/float64(uint64(1)<<53) < p.Share
}

// apply marks spec to be abandoned when p picks it.
func (p CancelPolicy) apply(spec *RequestSpec, seed int64) {
	if spec.Warmup || !p.picks(seed, spec.Seq) {
		return
	}
	spec.AbandonTokens, spec.AbandonAfter = p.Tokens, p.After
}

// maxWaitingChats bounds the open loop's sessions between turns: a long
// think time at a high rate would otherwise hold every session's history
// at once. A session past the bound ends early (its next turn is not sent).
const maxWaitingChats = 4096

// chatPool holds the open loop's sessions between their turns. The rate
// stays the rate of requests: each scheduled request is the next turn of
// the session whose think time has been over longest, or, when none is
// ready, the first turn of a new session; so sessions interleave under
// the pacer, and a session never has two turns in flight.
type chatPool struct {
	mu    sync.Mutex
	ready []waitingChat // by the time each may send its next turn
}

type waitingChat struct {
	c  *chat
	at time.Time
}

// take returns the session ready longest at now, or nil when none is.
func (p *chatPool) take(now time.Time) *chat {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 || p.ready[0].at.After(now) {
		return nil
	}
	c := p.ready[0].c
	p.ready = slices.Delete(p.ready, 0, 1)
	return c
}

// put keeps c until at, when its next turn may go; false when the pool is
// full and c ends here.
func (p *chatPool) put(c *chat, at time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) >= maxWaitingChats {
		return false
	}
	i, _ := slices.BinarySearchFunc(p.ready, at, func(w waitingChat, t time.Time) int { return w.at.Compare(t) })
	p.ready = slices.Insert(p.ready, i, waitingChat{c, at})
	return true
}
