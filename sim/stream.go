package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The chunk and response shapes follow vLLM's OpenAI server.

type usage struct {
	PromptTokens            int                `json:"prompt_tokens"`
	CompletionTokens        int                `json:"completion_tokens"`
	TotalTokens             int                `json:"total_tokens"`
	PromptTokensDetails     *tokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionDetails `json:"completion_tokens_details,omitempty"`
}

// completionDetails is usage.completion_tokens_details: sent by a
// reasoning model only.
type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// tokensDetails is usage.prompt_tokens_details.
type tokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// A reasoning model's thinking, under one of the two names servers use
	// (see Reasoning.Field).
	Reasoning        *string `json:"reasoning,omitempty"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

type chatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     any       `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type textChunkChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// chunk is one SSE event of either endpoint; Choices holds chatChunkChoice or
// textChunkChoice values.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []any  `json:"choices"`
	Usage   *usage `json:"usage,omitempty"`
	Truth   *Truth `json:"latscope_truth,omitempty"`
	// Padding makes the oversized fault's event larger than 1 MiB while
	// keeping it valid JSON.
	Padding string `json:"latscope_padding,omitempty"`
}

// rawPlaceholder stands in for content that must be written as raw bytes
// (split-utf8): encoding/json would replace invalid UTF-8 with U+FFFD.
const rawPlaceholder = "@@latscope-raw@@"

// oversizedPadding is the size of the oversized fault's padding.
const oversizedPadding = 1<<20 + 1024

func (r *request) chunkID() string {
	if r.gen.chat {
		return "chatcmpl-" + r.id
	}
	return "cmpl-" + r.id
}

func (r *request) newChunk() chunk {
	obj := "text_completion"
	if r.gen.chat {
		obj = "chat.completion.chunk"
	}
	return chunk{ID: r.chunkID(), Object: obj, Created: r.created, Model: r.gen.model, Choices: []any{}}
}

// roleChunk is the first chat event: the role, with empty content.
func (r *request) roleChunk() chunk {
	c := r.newChunk()
	empty := ""
	c.Choices = []any{chatChunkChoice{Delta: chatDelta{Role: "assistant", Content: &empty}}}
	return c
}

// contentChunk carries output token i: a reasoning delta while the model
// is thinking, then answer content.
func (r *request) contentChunk(i int, text string) chunk {
	c := r.newChunk()
	if r.gen.chat {
		var d chatDelta
		switch {
		case !r.gen.reasoning.thinks(i):
			d.Content = &text
		case r.gen.reasoning.Field == ReasoningContentField:
			d.ReasoningContent = &text
		default:
			d.Reasoning = &text
		}
		c.Choices = []any{chatChunkChoice{Delta: d}}
	} else {
		c.Choices = []any{textChunkChoice{Text: text}}
	}
	return c
}

func (r *request) finishChunk(reason string) chunk {
	c := r.newChunk()
	if r.gen.chat {
		c.Choices = []any{chatChunkChoice{FinishReason: &reason}}
	} else {
		c.Choices = []any{textChunkChoice{FinishReason: &reason}}
	}
	return c
}

func (r *request) usage(details *tokensDetails) *usage {
	u := &usage{PromptTokens: r.promptTokens, CompletionTokens: r.fe.tokens, TotalTokens: r.promptTokens + r.fe.tokens,
		PromptTokensDetails: details}
	if n := r.reasoningTokens(); n > 0 {
		u.CompletionTokensDetails = &completionDetails{ReasoningTokens: n}
	}
	return u
}

// reasoningTokens is how many of the tokens generated so far were reasoning.
func (r *request) reasoningTokens() int {
	if !r.gen.chat {
		return 0
	}
	return min(r.gen.reasoning.Tokens, r.fe.tokens)
}

// appendContent appends the events that carry output token i: the first
// is preceded by the stream's opening event (chat's role chunk, the
// Responses API's response.created). pad makes the event oversized.
func (r *request) appendContent(buf []byte, i int, text, raw string, pad bool) ([]byte, error) {
	switch {
	case r.gen.responses:
		return r.appendResponsesDelta(buf, i, text, raw, pad)
	case r.gen.anthropic:
		return r.appendMessagesDelta(buf, i, text, raw, pad)
	}
	var err error
	if i == 0 && r.gen.chat {
		if buf, err = appendEvent(buf, r.roleChunk(), ""); err != nil {
			return buf, err
		}
	}
	c := r.contentChunk(i, text)
	if pad {
		c.Padding = padding(oversizedPadding)
	}
	return appendEvent(buf, c, raw)
}

// appendEnd appends the events that end a complete stream: the finish
// chunk, the usage chunk when asked for and [DONE] (the Responses API:
// response.completed, or response.incomplete at the length limit, with
// the usage). truth, if not nil, rides on the last event.
func (r *request) appendEnd(buf []byte, details *tokensDetails, truth *Truth) ([]byte, error) {
	switch {
	case r.gen.responses:
		return r.appendResponsesEnd(buf, details, truth)
	case r.gen.anthropic:
		return r.appendMessagesEnd(buf, details, truth)
	}
	fin := r.finishChunk(r.finishReason)
	if !r.gen.includeUsage {
		fin.Truth = truth
	}
	buf, err := appendEvent(buf, fin, "")
	if err == nil && r.gen.includeUsage {
		u := r.newChunk()
		u.Usage = r.usage(details)
		u.Truth = truth
		buf, err = appendEvent(buf, u, "")
	}
	if err != nil {
		return buf, err
	}
	return append(buf, "data: [DONE]\n\n"...), nil
}

// appendEvent appends c as one SSE event. raw, if not empty, replaces the
// content placeholder byte for byte.
func appendEvent(buf []byte, c chunk, raw string) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return buf, fmt.Errorf("encode chunk: %w", err)
	}
	if raw != "" {
		b = bytes.Replace(b, []byte(rawPlaceholder), []byte(raw), 1)
	}
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	return append(buf, "\n\n"...), nil
}

// malformedEvent is a chunk cut off in the middle of its JSON.
func (r *request) malformedEvent() []byte {
	if r.gen.anthropic {
		return messagesMalformedEvent()
	}
	return []byte(fmt.Sprintf("data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" bro\n\n", r.chunkID()))
}

// errorEvent is the event that ends a stream whose generation failed: an
// error chunk and [DONE], or the Messages API's error event.
func (r *request) errorEvent(truth *Truth) ([]byte, error) {
	if r.gen.anthropic {
		return r.messagesErrorEvent(truth)
	}
	b, err := json.Marshal(struct {
		Error *apiError `json:"error"`
		Truth *Truth    `json:"latscope_truth,omitempty"`
	}{generationError(), truth})
	if err != nil {
		return nil, fmt.Errorf("encode error event: %w", err)
	}
	return append(append([]byte("data: "), b...), "\n\ndata: [DONE]\n\n"...), nil
}

// splitUTF8 returns the raw contents of the two frames that carry " café"
// with the two bytes of "é" (C3 A9) split between them.
func splitUTF8() (first, second string) {
	return " caf\xc3", "\xa9"
}

// nonStreamBody is the JSON body of a non-streaming response.
func (r *request) nonStreamBody(truth *Truth) ([]byte, error) {
	switch {
	case r.gen.responses:
		return r.responsesBody(truth)
	case r.gen.anthropic:
		return r.messagesBody(truth)
	}
	reason := r.fe.finishReason
	text := r.fe.text.String()
	var choice any
	obj := "text_completion"
	if r.gen.chat {
		obj = "chat.completion"
		choice = struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			Logprobs     any    `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		}{Message: struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}{"assistant", text}, FinishReason: reason}
	} else {
		choice = struct {
			Index        int    `json:"index"`
			Text         string `json:"text"`
			Logprobs     any    `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		}{Text: text, FinishReason: reason}
	}
	body := struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []any  `json:"choices"`
		Usage   *usage `json:"usage"`
		Truth   *Truth `json:"latscope_truth,omitempty"`
	}{r.chunkID(), obj, r.created, r.gen.model, []any{choice}, r.usage(r.fe.details), truth}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return b, nil
}

// padding returns n bytes of filler.
func padding(n int) string { return strings.Repeat("x", n) }
