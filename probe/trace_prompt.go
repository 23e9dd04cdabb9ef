package probe

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// TracePacer sends on a trace's schedule, Speed times as fast (2: twice
// the trace's rate), and stops after its last request.
type TracePacer struct {
	trace *Trace
	speed float64
}

var _ Pacer = (*TracePacer)(nil)

// NewTracePacer returns the pacer of trace at speed.
func NewTracePacer(trace *Trace, speed float64) (*TracePacer, error) {
	switch {
	case trace == nil || len(trace.Requests) == 0:
		return nil, errors.New("trace: no requests")
	case !(speed > 0) || math.IsInf(speed, 0):
		return nil, fmt.Errorf("trace speed %v: want a positive factor (1: as recorded)", speed)
	}
	return &TracePacer{trace: trace, speed: speed}, nil
}

// Pace implements Pacer.
func (p *TracePacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(p.trace.Requests)) {
		return 0, true
	}
	due := float64(p.trace.Requests[hits].At) / p.speed
	return time.Duration(due) - elapsed, false
}

// leadSalt keeps the words that start a trace request's prompt apart from
// those that start a hash block's.
const leadSalt = 0x51ed27

// ForTrace returns request seq of trace: its prompt, built from the
// calibrated blocks to the trace's length, and its lengths. Requests whose
// Mooncake hash ids agree share those blocks' text, so a prefix cache sees
// the sharing the trace had; the rest of a prompt is its own from its
// first token.
func (p *PromptSource) ForTrace(trace *Trace, seq uint64) (prompt string, promptTokens, outputTokens int) {
	req := trace.Requests[seq%uint64(len(trace.Requests))]
	left := p.correctTarget(float64(req.PromptTokens)) - p.overhead
	var b strings.Builder
	b.Grow(int(left/p.wordCost*7) + 16)
	if trace.BlockTokens > 0 {
		left = p.appendHashBlocks(&b, req.HashIDs, float64(trace.BlockTokens), left)
	}
	if left >= 0.5 {
		rng := rand.New(rand.NewPCG(uint64(p.cfg.Seed)^leadSalt, seq))
		p.appendLed(&b, rng, seq+leadSalt, left)
	}
	return b.String(), req.PromptTokens, req.OutputTokens
}

// appendHashBlocks appends the text of each hash block that the prompt
// reaches (the first block holds the prompt's overhead, every other one
// blockTokens), the last one cut to what is left, and returns what is
// left after them. The same id always gives the same text.
func (p *PromptSource) appendHashBlocks(b *strings.Builder, ids []uint64, blockTokens, left float64) float64 {
	for i, id := range ids {
		n := blockTokens
		if i == 0 {
			n -= p.overhead
		}
		n = min(n, left)
		if n < 0.5 {
			break
		}
		rng := rand.New(rand.NewPCG(uint64(p.cfg.Seed), id))
		left -= p.appendLed(b, rng, id, n)
	}
	return left
}

// appendLed appends about tokens tokens that start with two words chosen by
// key, so that texts of different keys differ from their first token, and
// returns their estimated length.
func (p *PromptSource) appendLed(b *strings.Builder, rng *rand.Rand, key uint64, tokens float64) float64 {
	got := 0.0
	k := key + uint64(p.cfg.Seed)*7919
	for _, i := range [2]uint64{k % wordCount, (k / wordCount) % wordCount} {
		cost := p.wordCost
		if p.wordCosts != nil {
			cost = p.wordCosts[i]
		}
		if got > 0 && got+cost > tokens+0.5 {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.words[i])
		got += cost
	}
	if tokens-got >= 0.5 {
		got += p.appendText(b, rng, tokens-got, true)
	}
	return got
}
