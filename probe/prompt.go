package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
)

// PromptConfig says what prompts to send.
type PromptConfig struct {
	PromptTokens Length // target prompt length (ignored for a prompt file)
	OutputTokens Length // tokens to ask for
	// SharedPrefix asks for this many identical leading tokens in every
	// generated prompt, to measure a prefix cache on purpose. Zero makes
	// prompts differ from their very first token.
	SharedPrefix int
	// Seed draws the text prompts are built from (the blocks calibration
	// counts, and the shared prefix) and each request's choice of it: the
	// same seed gives the same prompts, run after run.
	Seed int64
	// Nonce varies every prompt without changing what calibration counted:
	// a source with another nonce builds other prompts from the same
	// calibrated blocks (a different leading word and block order), so a
	// prefix cache that saw one source's prompts cannot serve the other's.
	// The shared prefix stays. Zero sends the seed's prompts unchanged.
	// WithNonce derives such a source without calibrating again.
	Nonce uint64

	// File, when set, is a prompt file (one prompt per line, JSON or plain
	// text) cycled through instead of generated prompts.
	File string

	// Tokenizer counts tokens the server's way. Nil means "assume about one
	// token per word" and correct from the usage the first responses report.
	Tokenizer Tokenizer
	// ShortestPrompt is the shortest prompt that will be asked for when it
	// is not PromptTokens' (a trace's); 0: PromptTokens says. Below 128
	// tokens calibration counts every word (see shortPromptTokens).
	ShortestPrompt int
}

// Calibration says how prompt lengths are being estimated, for the run's
// header and the status line.
type Calibration struct {
	// Source is "tokenizer" (counted by the server's tokenize endpoint),
	// "assumed" (about one token per word) or either with "+usage" once the
	// first responses' usage corrected it.
	Source        string
	TokensPerWord float64 // average server tokens per generated word
	Overhead      float64 // tokens the server adds to every prompt (special tokens, template)
	// UsageScale and UsageOffset map a target to what the server reported:
	// reported ≈ UsageOffset + UsageScale*target (1 and 0 until learned).
	UsageScale, UsageOffset float64
	Observations            int
}

// ErrTokenizer marks a prompt source that could not be built because the
// tokenizer failed: the caller may build one without it.
var ErrTokenizer = errors.New("tokenizer failed")

// usageSamples is how many responses' usage the correction is learned from.
// Every one of them was built with the uncorrected model, which keeps the
// fit unambiguous; later observations are not used.
const usageSamples = 8

// blockWords and blockCount shape the generated text: prompts are sequences
// of whole blocks, each counted once by the tokenizer, so a prompt's length
// is a sum of measured counts rather than a per-word guess.
// Small blocks keep the estimated tail short, which matters for short
// prompts; 64 of them cost 64 tokenize calls at start-up.
const (
	blockWords = 8
	blockCount = 64
	wordCount  = 2048
)

// PromptSource hands out one prompt per request. Next is safe for
// concurrent use; Observe may be called concurrently with it.
type PromptSource struct {
	cfg    PromptConfig
	words  []string
	blocks []promptBlock
	// wordCost is the average tokens per word, for the words outside
	// blocks (the leading varying word and the tail).
	wordCost float64
	// wordCosts, when short prompts are asked for, is what each word
	// costs (see countWords); wordIndex finds a word's, and cheapWords
	// are the cheapest, which fill a prompt's last tokens exactly.
	wordCosts  []float64
	wordIndex  map[string]int
	cheapWords []int

	overhead float64
	source   string
	file     []filePrompt

	prefix       string  // the shared prefix text, "" when none
	prefixTokens float64 // its estimated length

	usage *sharedUsage // shared with the sources WithNonce derives
}

// sharedUsage is the usage correction, learned once for a source and the
// sources derived from it (they build prompts from the same blocks).
type sharedUsage struct {
	mu  sync.Mutex
	fit usageFit
}

type promptBlock struct {
	text   string
	tokens float64
}

type filePrompt struct {
	text   string
	tokens int
}

// NewPromptSource builds the word list and blocks, calibrates them with the
// tokenizer when there is one, and reads the prompt file when one is named.
// A tokenizer that fails is an error wrapping ErrTokenizer: the caller
// decides whether to build one without it.
func NewPromptSource(ctx context.Context, cfg PromptConfig) (*PromptSource, error) {
	if cfg.File == "" && cfg.PromptTokens.Mean < 1 {
		return nil, errors.New("prompt tokens: want at least 1")
	}
	if cfg.OutputTokens.Mean < 1 {
		return nil, errors.New("output tokens: want at least 1")
	}
	if cfg.SharedPrefix < 0 {
		return nil, fmt.Errorf("shared prefix %d: want 0 or more tokens", cfg.SharedPrefix)
	}
	p := &PromptSource{cfg: cfg, words: wordList(), wordCost: 1, source: "assumed", usage: &sharedUsage{}}
	p.blocks = makeBlocks(p.words, cfg.Seed)
	if cfg.Tokenizer != nil {
		if err := p.calibrate(ctx, cfg.Tokenizer); err != nil {
			return nil, err
		}
	}
	if cfg.SharedPrefix > 0 {
		p.prefix, p.prefixTokens = p.build(rand.New(rand.NewPCG(uint64(cfg.Seed), math.MaxUint64)), float64(cfg.SharedPrefix), false)
	}
	if cfg.File != "" {
		texts, err := readPromptFile(cfg.File)
		if err != nil {
			return nil, err
		}
		p.file, err = p.countFilePrompts(ctx, texts)
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// WithNonce returns a source that builds its prompts from p's calibrated
// blocks with another nonce (see PromptConfig.Nonce): different prompts at
// no tokenize call, e.g. one source per step of a sweep. The two share the
// usage correction. p is not changed.
func (p *PromptSource) WithNonce(nonce uint64) *PromptSource {
	q := *p
	q.cfg.Nonce = nonce
	return &q
}

// nonceMix spreads a nonce over the generator's seed (an odd constant, so
// distinct nonces give distinct seeds); nonce 0 leaves the seed as it is.
const nonceMix = 0x9e3779b97f4a7c15

// Next returns the prompt for request seq, its expected length in the
// server's tokens, and the number of output tokens to ask for. The same seq,
// seed and nonce always give the same answer (until usage corrects the
// lengths).
func (p *PromptSource) Next(seq uint64) (prompt string, promptTokens int, outputTokens int) {
	rng := rand.New(rand.NewPCG(uint64(p.cfg.Seed)^(p.cfg.Nonce*nonceMix), seq))
	outputTokens = p.cfg.OutputTokens.Sample(rng)
	if len(p.file) > 0 {
		fp := p.file[seq%uint64(len(p.file))]
		return fp.text, fp.tokens, outputTokens
	}
	target := p.cfg.PromptTokens.Sample(rng)
	build := p.correctTarget(float64(target)) - p.overhead
	var b strings.Builder
	b.Grow(len(p.prefix) + int(build/p.wordCost*7) + 16)
	if p.prefix != "" {
		b.WriteString(p.prefix)
		build -= p.prefixTokens
		if build < 1 {
			// The prefix alone fills the target: every prompt is the prefix.
			return p.prefix, target, outputTokens
		}
		b.WriteByte(' ')
	}
	// The first generated word depends only on seq (and the seed and
	// nonce), and 7919 is odd, so any wordCount consecutive requests start
	// differently: a prefix cache cannot serve one request from another's.
	// The nonce moves the sequence, so the same seq starts differently too.
	b.WriteString(p.words[(seq*7919+uint64(p.cfg.Seed)+p.cfg.Nonce)%wordCount])
	build -= p.wordCost
	build += p.leadCorrection(b.String())
	if build >= 0.5 {
		p.appendText(&b, rng, build, true)
	}
	return b.String(), target, outputTokens
}

// Observe feeds back what the server counted for a prompt generated for
// targetTokens. The first few observations fit a correction that later
// prompts use; prompt-file prompts and nonsense values are ignored.
func (p *PromptSource) Observe(targetTokens, reportedPromptTokens int) {
	if len(p.file) > 0 || targetTokens < 1 || reportedPromptTokens < 1 {
		return
	}
	p.usage.mu.Lock()
	defer p.usage.mu.Unlock()
	p.usage.fit.add(float64(targetTokens), float64(reportedPromptTokens))
}

// Calibration reports the current length model.
func (p *PromptSource) Calibration() Calibration {
	p.usage.mu.Lock()
	defer p.usage.mu.Unlock()
	u := &p.usage.fit
	c := Calibration{
		Source:        p.source,
		TokensPerWord: p.wordCost,
		Overhead:      p.overhead,
		UsageScale:    1,
		Observations:  u.n,
	}
	if u.ready {
		c.Source += "+usage"
		c.UsageScale, c.UsageOffset = u.scale, u.offset
	}
	return c
}

// correctTarget turns a target into the length to build for, undoing the
// learnt difference between what we build and what the server counts.
func (p *PromptSource) correctTarget(target float64) float64 {
	p.usage.mu.Lock()
	defer p.usage.mu.Unlock()
	u := &p.usage.fit
	if !u.ready {
		return target
	}
	return max((target-u.offset)/u.scale, 1)
}

// build returns generated text of about tokens server tokens (content
// only, without overhead) and its estimated length; see appendText.
func (p *PromptSource) build(rng *rand.Rand, tokens float64, shuffle bool) (string, float64) {
	var b strings.Builder
	b.Grow(int(tokens/p.wordCost*7) + 16) // words average under six letters and a space
	got := p.appendText(&b, rng, tokens, shuffle)
	return b.String(), got
}

// appendText appends about tokens server tokens of generated text to b
// (space-separated from what b holds): whole blocks in an order drawn from
// rng, then single words for the remainder. shuffle=false keeps the block
// order fixed, for the shared prefix. It returns the estimated length.
func (p *PromptSource) appendText(b *strings.Builder, rng *rand.Rand, tokens float64, shuffle bool) float64 {
	got := 0.0
	order := make([]int, len(p.blocks))
	for i := range order {
		order[i] = i
	}
	for got < tokens {
		if shuffle {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		added := false
		for _, i := range order {
			blk := p.blocks[i]
			if got+blk.tokens > tokens {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(blk.text)
			got += blk.tokens
			added = true
		}
		if !added {
			break
		}
	}
	// The tail: words until the remainder is used up, rounding to nearest.
	for {
		w, cost, ok := p.tailWord(rng, tokens-got)
		if !ok {
			return got
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		got += cost
	}
}

// usageFit learns reported ≈ offset + scale*target from the first
// usageSamples observations.
type usageFit struct {
	n                int
	sx, sy, sxx, sxy float64
	ready            bool
	scale, offset    float64
}

func (u *usageFit) add(x, y float64) {
	if u.ready || u.n >= usageSamples {
		return
	}
	u.n++
	u.sx += x
	u.sy += y
	u.sxx += x * x
	u.sxy += x * y
	if u.n < usageSamples {
		return
	}
	n := float64(u.n)
	scale, offset := u.sy/u.sx, 0.0
	if v := u.sxx/n - (u.sx/n)*(u.sx/n); v > 1e-9*(u.sxx/n) {
		scale = (u.sxy/n - u.sx/n*u.sy/n) / v
		offset = u.sy/n - scale*u.sx/n
	}
	// A wild fit (a server that reports something else as prompt tokens)
	// is ignored rather than trusted.
	if scale < 0.2 || scale > 5 || math.IsNaN(scale) || math.IsNaN(offset) {
		return
	}
	u.ready, u.scale, u.offset = true, scale, offset
}

// calibrate counts every block with the tokenizer and learns the fixed
// overhead the tokenizer adds to any text.
func (p *PromptSource) calibrate(ctx context.Context, tok Tokenizer) error {
	counts := make([]int, len(p.blocks))
	words := 0
	total := 0
	for i, blk := range p.blocks {
		n, err := tok.Count(ctx, blk.text)
		if err != nil {
			return fmt.Errorf("calibrate prompts: %w: %w", ErrTokenizer, err)
		}
		counts[i] = n
	}
	// count(a) + count(b) - count(a b) is the overhead counted once per
	// call (BOS and the like), including any effect of the join.
	both, err := tok.Count(ctx, p.blocks[0].text+" "+p.blocks[1].text)
	if err != nil {
		return fmt.Errorf("calibrate prompts: %w: %w", ErrTokenizer, err)
	}
	overhead := float64(max(counts[0]+counts[1]-both, 0))
	for i := range p.blocks {
		p.blocks[i].tokens = max(float64(counts[i])-overhead, 1)
		total += counts[i] - int(overhead)
		words += blockWords
	}
	p.overhead = overhead
	p.wordCost = max(float64(total)/float64(words), 0.1)
	p.source = "tokenizer"
	if p.wantWordCosts() {
		if err := p.countWords(ctx, tok); err != nil {
			return fmt.Errorf("calibrate prompts: %w: %w", ErrTokenizer, err)
		}
	}

	// Check the model on one long prompt: joins between blocks can cost
	// tokens that counting blocks alone misses. Scale every estimate by
	// what the check finds.
	const checkTokens = 4096
	text, est := p.build(rand.New(rand.NewPCG(0, 0)), checkTokens, true)
	n, err := tok.Count(ctx, text)
	if err != nil {
		return fmt.Errorf("calibrate prompts: %w: %w", ErrTokenizer, err)
	}
	if scale := (float64(n) - overhead) / est; scale > 0.2 && scale < 5 {
		for i := range p.blocks {
			p.blocks[i].tokens *= scale
		}
		p.wordCost *= scale
		p.scaleWordCosts(scale)
	}
	return nil
}

// countFilePrompts gives each prompt-file line a length: counted by the
// tokenizer for up to maxCountedFilePrompts lines, estimated for the rest.
func (p *PromptSource) countFilePrompts(ctx context.Context, texts []string) ([]filePrompt, error) {
	const maxCountedFilePrompts = 256
	out := make([]filePrompt, len(texts))
	for i, t := range texts {
		out[i].text = t
		if p.cfg.Tokenizer != nil && i < maxCountedFilePrompts {
			n, err := p.cfg.Tokenizer.Count(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("count prompt-file line %d: %w: %w", i+1, ErrTokenizer, err)
			}
			out[i].tokens = n
			continue
		}
		// About 4/3 tokens per English word for common tokenizers.
		out[i].tokens = int(math.Round(p.overhead + float64(len(strings.Fields(t)))*4/3))
	}
	return out, nil
}

// makeBlocks draws the blocks' words from the word list with a seeded
// generator. Their lengths start as one token per word.
func makeBlocks(words []string, seed int64) []promptBlock {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xb10c))
	blocks := make([]promptBlock, blockCount)
	var b strings.Builder
	for i := range blocks {
		b.Reset()
		for w := range blockWords {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		blocks[i] = promptBlock{text: b.String(), tokens: blockWords}
	}
	return blocks
}

// wordList makes wordCount distinct pronounceable pseudo-words from a fixed
// generator: no external data, the same list in every build. Short
// syllables keep most words at one or two tokens in common tokenizers.
func wordList() []string {
	onsets := []string{"b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st", "tr", "pl", "gr", "ch", "sh"}
	vowels := []string{"a", "e", "i", "o", "u", "ai", "ou"}
	codas := []string{"", "", "n", "r", "l", "s", "t", "m"}
	rng := rand.New(rand.NewPCG(0x1a75c0, 0x9e)) // fixed: the list never changes
	seen := make(map[string]bool, wordCount)
	out := make([]string, 0, wordCount)
	var b strings.Builder
	for len(out) < wordCount {
		b.Reset()
		for range 1 + rng.IntN(2) {
			b.WriteString(onsets[rng.IntN(len(onsets))])
			b.WriteString(vowels[rng.IntN(len(vowels))])
			b.WriteString(codas[rng.IntN(len(codas))])
		}
		w := b.String()
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
