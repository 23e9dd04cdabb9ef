package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
)

// shortPromptTokens is the prompt length below which counting blocks is not
// enough: a prompt that short is a few words, and one word more or less
// than the average cost is several percent of it. Below it, calibration
// counts every word of the list, so each word a prompt is built from costs
// what the server counts.
const shortPromptTokens = 128

// wordCountWorkers bounds the tokenize calls in flight while every word is
// counted: 2048 of them, once, at start-up.
const wordCountWorkers = 8

// wantWordCosts reports whether prompts shorter than shortPromptTokens may
// be asked for.
func (p *PromptSource) wantWordCosts() bool {
	if p.cfg.File != "" {
		return false
	}
	shortest := p.cfg.PromptTokens.Mean - 3*p.cfg.PromptTokens.StdDev
	if p.cfg.ShortestPrompt > 0 {
		shortest = min(shortest, p.cfg.ShortestPrompt)
	}
	return shortest < shortPromptTokens
}

// countWords counts what every word costs after a space, as words inside a
// prompt stand: count(anchor w) - count(anchor).
func (p *PromptSource) countWords(ctx context.Context, tok Tokenizer) error {
	anchor := p.words[0]
	base, err := tok.Count(ctx, anchor)
	if err != nil {
		return err
	}
	costs := make([]float64, len(p.words))
	errs := make([]error, wordCountWorkers)
	var wg sync.WaitGroup
	for w := range wordCountWorkers {
		wg.Go(func() {
			for i := w; i < len(p.words); i += wordCountWorkers {
				n, err := tok.Count(ctx, anchor+" "+p.words[i])
				if err != nil {
					errs[w] = fmt.Errorf("count %q: %w", p.words[i], err)
					return
				}
				costs[i] = float64(max(n-base, 1))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	p.setWordCosts(costs)
	return nil
}

// setWordCosts keeps the counted costs, the index to find a word's, and
// the cheapest words, with which a prompt's last tokens are filled exactly.
func (p *PromptSource) setWordCosts(costs []float64) {
	p.wordCosts = costs
	p.wordIndex = make(map[string]int, len(p.words))
	cheapest := costs[0]
	for i, w := range p.words {
		p.wordIndex[w] = i
		cheapest = min(cheapest, costs[i])
	}
	p.cheapWords = p.cheapWords[:0]
	for i, c := range costs {
		if c == cheapest {
			p.cheapWords = append(p.cheapWords, i)
		}
	}
}

// scaleWordCosts scales the counted costs with the blocks (see calibrate).
func (p *PromptSource) scaleWordCosts(scale float64) {
	for i := range p.wordCosts {
		p.wordCosts[i] *= scale
	}
}

// leadCorrection is what the leading word of s (its last word) costs less
// than the average the prompt was planned with; 0 when words were not
// counted.
func (p *PromptSource) leadCorrection(s string) float64 {
	if p.wordCosts == nil {
		return 0
	}
	i, ok := p.wordIndex[s[strings.LastIndexByte(s, ' ')+1:]]
	if !ok {
		return 0
	}
	return p.wordCost - p.wordCosts[i]
}

// tailWord draws the next word of a prompt's tail with left tokens to go,
// and its cost: any word while it fits (rounding to nearest), else one of
// the cheapest; ok is false when not even those fit. Without counted
// costs every word costs the average.
func (p *PromptSource) tailWord(rng *rand.Rand, left float64) (word string, cost float64, ok bool) {
	if p.wordCosts == nil {
		return p.words[rng.IntN(wordCount)], p.wordCost, left >= p.wordCost/2
	}
	i := rng.IntN(wordCount)
	if c := p.wordCosts[i]; c <= left+0.5 {
		return p.words[i], c, true
	}
	i = p.cheapWords[rng.IntN(len(p.cheapWords))]
	c := p.wordCosts[i]
	return p.words[i], c, c <= left+0.5
}
