package probe

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/latscope/latscope/event"
)

// ollamaDialect speaks Ollama's native API: NDJSON lines, the last one
// "done": true with counts and durations in nanoseconds.
// chat selects /api/chat (message.content) over /api/generate (response).
// Ollama has no ignore_eos: a model may stop before num_predict.
type ollamaDialect struct{ chat bool }

func (d ollamaDialect) name() string {
	if d.chat {
		return DialectOllamaChat
	}
	return DialectOllamaGenerate
}

func (d ollamaDialect) path() string {
	if d.chat {
		return "/api/chat"
	}
	return "/api/generate"
}

func (ollamaDialect) endMarker() string { return `a line with "done": true` }
func (ollamaDialect) ndjson() bool      { return true }
func (ollamaDialect) asksUsage() bool   { return true } // the done object carries the counts

type ollamaRequest struct {
	Model    string        `json:"model"`
	Prompt   *string       `json:"prompt,omitempty"`
	Messages []chatMessage `json:"messages,omitempty"`
	Stream   bool          `json:"stream"`
	Options  struct {
		NumPredict int `json:"num_predict,omitempty"`
	} `json:"options"`
}

func (d ollamaDialect) body(model string, spec RequestSpec) ([]byte, error) {
	req := ollamaRequest{Model: model, Stream: true}
	if d.chat {
		req.Messages = spec.chatMessages()
	} else {
		prompt := spec.fullPrompt()
		req.Prompt = &prompt
	}
	req.Options.NumPredict = spec.OutputTokens
	return json.Marshal(req)
}

func (d ollamaDialect) parse(data []byte, c *chunkInfo) error {
	data = bytes.TrimSpace(data)
	if !jsonObject(data) {
		return malformed(d.name(), data, errNotObject)
	}
	contentKey := "response"
	if d.chat {
		contentKey = "content"
	}
	content, thinking := -1, -1
	for i := 0; ; {
		key, v, next := nextKey(data, i)
		if next < 0 {
			break
		}
		i = next
		// Comparisons, not switch string(key): they do not copy the key.
		switch {
		case string(key) == contentKey:
			if content < 0 {
				content = v
			}
		case string(key) == "thinking":
			if thinking < 0 {
				thinking = v
			}
		case string(key) == "done":
			if data[v] != 'f' {
				return d.parseFull(data, c)
			}
		case string(key) == "error":
			return d.parseFull(data, c)
		}
	}
	v, st := scanAt(data, content)
	reasoning := false
	if (st != fieldString || !v.nonEmpty) && thinking >= 0 {
		// Thinking models stream their reasoning first, in another field.
		tv, tst := scanAt(data, thinking)
		switch tst {
		case fieldString:
			v, st, reasoning = tv, tst, true
		case fieldOther:
			st = fieldOther
		}
	}
	if st != fieldString {
		return d.parseFull(data, c)
	}
	if v.nonEmpty {
		c.tokens = 1
		c.reasoning = reasoning
		c.replacements, c.quoted = v.replacements, v.quoted
	}
	return nil
}

// StageLoad is the key under which Ollama's load_duration is kept in
// event.ServerTiming.Stages. It runs from the handler's start until a runner
// is scheduled and loaded, so it holds the scheduler queue wait and any model
// load together (Ollama takes its load timestamp after scheduling the
// runner); calling it queue would hide a cold load.
const StageLoad event.Stage = "load"

type ollamaChunk struct {
	Response string `json:"response"`
	Thinking string `json:"thinking"`
	Message  *struct {
		Content  string `json:"content"`
		Thinking string `json:"thinking"`
	} `json:"message"`
	Done bool `json:"done"`
	// Durations are nanoseconds; all are omitted when zero.
	TotalDuration      int64           `json:"total_duration"`
	LoadDuration       int64           `json:"load_duration"`
	PromptEvalCount    int             `json:"prompt_eval_count"`
	PromptEvalDuration int64           `json:"prompt_eval_duration"`
	EvalCount          int             `json:"eval_count"`
	EvalDuration       int64           `json:"eval_duration"`
	Error              json.RawMessage `json:"error"`
}

func (d ollamaDialect) parseFull(data []byte, c *chunkInfo) error {
	var ch ollamaChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return malformed(d.name(), data, err)
	}
	if msg := errorMessage(ch.Error); msg != "" {
		c.serverErr = msg
		return nil
	}
	text, thinking := ch.Response, ch.Thinking
	if ch.Message != nil {
		text, thinking = ch.Message.Content, ch.Message.Thinking
	}
	if text == "" && thinking != "" {
		text, c.reasoning = thinking, true
	}
	if text != "" {
		c.tokens = 1
		c.replacements, c.text = countRunesFFFD(text), text
	}
	if !ch.Done {
		return nil
	}
	c.end = true
	if ch.EvalCount > 0 || ch.PromptEvalCount > 0 {
		c.usage = true
		c.promptTokens = ch.PromptEvalCount
		c.outputTokens = ch.EvalCount
	}
	if ch.TotalDuration > 0 {
		c.timing = &event.ServerTiming{
			Source: "ollama.final",
			Stages: map[event.Stage]time.Duration{
				event.StageServerE2E: time.Duration(ch.TotalDuration),
				StageLoad:            time.Duration(ch.LoadDuration),
				event.StagePrefill:   time.Duration(ch.PromptEvalDuration),
				event.StageDecode:    time.Duration(ch.EvalDuration),
			},
			PromptTokens: ch.PromptEvalCount,
			OutputTokens: ch.EvalCount,
		}
	}
	return nil
}
