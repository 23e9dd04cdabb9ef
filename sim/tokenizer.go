package sim

import (
	"hash/fnv"
	"strings"
	"unicode/utf8"
)

// The token model, shared by usage, /tokenize and the cost model:
//   - text splits on whitespace into words; a word of n runes is ceil(n/8)
//     tokens (so ordinary words are one token each);
//   - the chat template adds 4 tokens per message (start, role, separator,
//     end) and 2 for the generation prompt (start, assistant role);
//   - a completions prompt is its words, with no special tokens.
//
// Generated tokens are short words with a leading space, one token each.
const (
	runesPerToken        = 8
	templateTokensPerMsg = 4
	generationPromptToks = 2
	vocabOffset          = 100 // ids below are special tokens
	vocabSize            = 32000
)

// Special token ids used by the chat template.
const (
	tokStart = 1 + iota
	tokSep
	tokEnd
	tokRoleSystem
	tokRoleUser
	tokRoleAssistant
	tokRoleOther
)

// countText returns the number of tokens in text.
func countText(text string) int {
	n := 0
	for _, w := range strings.Fields(text) {
		n += wordTokens(w)
	}
	return n
}

func wordTokens(w string) int {
	return (utf8.RuneCountInString(w) + runesPerToken - 1) / runesPerToken
}

// tokenIDs appends the ids of text's tokens to ids. Ids are a hash of each
// piece, so equal pieces get equal ids.
func tokenIDs(ids []int, text string) []int {
	for _, w := range strings.Fields(text) {
		r := []rune(w)
		for i := 0; i < len(r); i += runesPerToken {
			j := min(i+runesPerToken, len(r))
			h := fnv.New32a()
			h.Write([]byte(string(r[i:j])))
			ids = append(ids, vocabOffset+int(h.Sum32()%(vocabSize-vocabOffset)))
		}
	}
	return ids
}

// message is one chat message after validation: its text content only.
type message struct {
	Role string
	Text string
}

// countChat returns the token count of messages under the chat template.
func countChat(msgs []message, addGenerationPrompt bool) int {
	n := 0
	for _, m := range msgs {
		n += templateTokensPerMsg + countText(m.Text)
	}
	if addGenerationPrompt {
		n += generationPromptToks
	}
	return n
}

// chatIDs returns the token ids of messages under the chat template; its
// length is countChat's result.
func chatIDs(msgs []message, addGenerationPrompt bool) []int {
	var ids []int
	for _, m := range msgs {
		ids = append(ids, tokStart, roleID(m.Role), tokSep)
		ids = tokenIDs(ids, m.Text)
		ids = append(ids, tokEnd)
	}
	if addGenerationPrompt {
		ids = append(ids, tokStart, tokRoleAssistant)
	}
	return ids
}

func roleID(role string) int {
	switch role {
	case "system", "developer":
		return tokRoleSystem
	case "user":
		return tokRoleUser
	case "assistant":
		return tokRoleAssistant
	}
	return tokRoleOther
}

// vocabulary is what the simulated model says; every word is one token.
var vocabulary = [...]string{
	"the", "latency", "of", "a", "request", "is", "spent", "in", "queue",
	"prefill", "and", "decode", "while", "tokens", "stream", "back", "to",
	"client", "over", "network", "each", "step", "batch", "grows", "cache",
	"model", "server", "token", "time", "first", "every", "millis", "kernel",
	"memory", "fast", "slow", "when", "load", "rises", "waits", "for", "slot",
}

// generatedWord returns the text of output token i of a request whose
// sequence number is seq: deterministic for a given seed.
func generatedWord(seed int64, seq uint64, i int) string {
	h := fnv.New64a()
	var b [24]byte
	for k := 0; k < 8; k++ {
		b[k] = byte(uint64(seed) >> (8 * k))
		b[8+k] = byte(seq >> (8 * k))
		b[16+k] = byte(uint64(i) >> (8 * k))
	}
	h.Write(b[:])
	return " " + vocabulary[h.Sum64()%uint64(len(vocabulary))]
}
