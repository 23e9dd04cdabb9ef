package probe

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/latscope/latscope/event"
)

// The dialects a Client speaks: each is one server API's request body,
// stream format and chunk fields.
const (
	DialectOpenAIChat        = "openai-chat"        // /v1/chat/completions, SSE, ends with [DONE]
	DialectOpenAICompletions = "openai-completions" // /v1/completions, SSE, ends with [DONE]
	DialectLlamaCpp          = "llamacpp"           // llama.cpp /completion, SSE, ends with "stop":true
	DialectTGI               = "tgi"                // TGI /generate_stream, SSE, ends with non-null generated_text
	DialectOllamaGenerate    = "ollama-generate"    // Ollama /api/generate, NDJSON, ends with "done":true
	DialectOllamaChat        = "ollama-chat"        // Ollama /api/chat, NDJSON, ends with "done":true
)

// Dialects lists the dialect names NewClient accepts.
func Dialects() []string {
	return []string{DialectOpenAIChat, DialectOpenAICompletions, DialectOpenAIResponses, DialectAnthropicMessages,
		DialectLlamaCpp, DialectTGI, DialectOllamaGenerate, DialectOllamaChat}
}

// chunkInfo is what one stream event said. A dialect's parse fills it; the
// zero value means "an event without content".
type chunkInfo struct {
	tokens       int  // output tokens carried; 0 = no content
	reasoning    bool // the tokens are reasoning (thinking), not answer
	end          bool // the dialect's end-of-stream marker
	usage        bool // promptTokens/outputTokens are the server's counts
	promptTokens int
	outputTokens int
	cachedTokens int    // prompt tokens the server took from its prompt cache (usage)
	reasonTokens int    // output tokens the usage says were reasoning
	replacements int    // U+FFFD in the content (see FlagUTF8Defect)
	serverErr    string // an error event's message
	// The content's text, for a conversation (RequestSpec.KeepAnswer):
	// quoted as the fast paths found it in the JSON (a view of the event's
	// data, valid until the next event), or text as the full decode got it.
	quoted []byte
	text   string
	timing *event.ServerTiming
}

// setText records one token of text that the fast path scanned as v.
func (c *chunkInfo) setText(v stringValue, reasoning bool) {
	c.tokens = 1
	c.reasoning = reasoning
	c.replacements = v.replacements
	c.quoted = v.quoted
}

// answerText is the answer text the event carried ("" for reasoning, or
// a dialect that does not say).
func (c *chunkInfo) answerText() string {
	switch {
	case c.reasoning:
		return ""
	case c.text != "":
		return c.text
	case len(c.quoted) >= 2:
		var s string
		if json.Unmarshal(c.quoted, &s) == nil {
			return s
		}
	}
	return ""
}

// dialect knows one server API.
type dialect interface {
	name() string
	path() string
	// endMarker describes the end of a complete stream, for messages.
	endMarker() string
	// ndjson reports whether the stream is NDJSON (else SSE).
	ndjson() bool
	// asksUsage reports whether the request asks the server for token counts
	// at the end of the stream (a missing count is then flagged).
	asksUsage() bool
	// body returns the JSON request body.
	body(model string, spec RequestSpec) ([]byte, error)
	// parse reads one event's data into c (which the caller has zeroed). A
	// chunk that does not parse returns an error wrapping errMalformed.
	parse(data []byte, c *chunkInfo) error
}

// dialectByName returns the named dialect.
func dialectByName(name string) (dialect, error) {
	switch name {
	case DialectOpenAIChat:
		return openAIDialect{chat: true}, nil
	case DialectOpenAICompletions:
		return openAIDialect{}, nil
	case DialectOpenAIResponses:
		return responsesDialect{}, nil
	case DialectAnthropicMessages:
		return anthropicDialect{}, nil
	case DialectLlamaCpp:
		return llamaCppDialect{}, nil
	case DialectTGI:
		return tgiDialect{}, nil
	case DialectOllamaGenerate:
		return ollamaDialect{}, nil
	case DialectOllamaChat:
		return ollamaDialect{chat: true}, nil
	}
	return nil, fmt.Errorf("unknown dialect %q (known: %v)", name, Dialects())
}

// DialectNeedsModel reports whether requests in the dialect must name a
// model: the OpenAI routes (a gateway or OpenAI itself refuses a request
// without one) and Ollama's. llama.cpp's /completion and TGI's
// /generate_stream serve the one model the server loaded.
func DialectNeedsModel(name string) bool {
	switch name {
	case DialectLlamaCpp, DialectTGI:
		return false
	}
	return true
}

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// usageCounts is the OpenAI usage object. prompt_tokens_details.cached_tokens
// (OpenAI, vLLM and SGLang with prefix caching) counts the prompt tokens
// served from the prompt cache; prompt_tokens includes them.
type usageCounts struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// completion_tokens_details.reasoning_tokens (OpenAI, vLLM with a
	// reasoning parser) counts the completion tokens that were reasoning.
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// reasoningTokens is the usage's reasoning tokens, 0 when not said.
func (u *usageCounts) reasoningTokens() int {
	if u.CompletionTokensDetails == nil {
		return 0
	}
	return u.CompletionTokensDetails.ReasoningTokens
}

// cachedTokens is the usage's cached prompt tokens, 0 when not said.
func (u *usageCounts) cachedTokens() int {
	if u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// maxServerStage is the longest stage a server may report for one
// request; anything longer (or negative) is a bogus figure and dropped.
const maxServerStage = 24 * time.Hour

// msDuration converts float milliseconds to a Duration. A value that is
// not a number, negative or past maxServerStage gives -1, which
// sanitizeTiming drops.
func msDuration(ms float64) time.Duration {
	if !(ms >= 0 && ms <= float64(maxServerStage/time.Millisecond)) {
		return -1
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// plausibleTokens reports whether a token count a server reported can be
// true: positive and at most limit. Anything else (a negative count, or
// 2^63-1 that would make throughput negative) is ignored.
func plausibleTokens(n, limit int) bool { return n > 0 && n <= limit }

// sanitizeTiming drops the stages a server cannot have meant (negative, or
// longer than maxServerStage) and token counts that cannot be true, so one
// bogus field cannot turn into a negative or absurd figure downstream.
func sanitizeTiming(st *event.ServerTiming, outputLimit int) {
	for k, d := range st.Stages {
		if d < 0 || d > maxServerStage {
			delete(st.Stages, k)
		}
	}
	if !plausibleTokens(st.PromptTokens, maxTokenLength) {
		st.PromptTokens = 0
	}
	if !plausibleTokens(st.OutputTokens, outputLimit) {
		st.OutputTokens = 0
	}
	if !plausibleTokens(st.CachedTokens, maxTokenLength) {
		st.CachedTokens = 0
	}
}
