package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/latscope/latscope/internal/fileread"
)

// maxPromptFile bounds a prompt file, which is held in memory.
const maxPromptFile = 64 << 20

// maxPromptLine bounds one prompt-file line.
const maxPromptLine = 16 << 20

// readPromptFile reads a prompt file: one prompt per line, either a JSON
// object ({"prompt": "..."} or {"messages": [...]}) or plain text. Blank
// lines are skipped; a bad JSON line is an error naming its line number.
func readPromptFile(path string) ([]string, error) {
	f, err := fileread.Open(path, fileread.Limit{Flag: "--prompt-file", Max: maxPromptFile, What: "a prompt file"})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prompts, err := parsePrompts(f)
	if err != nil {
		return nil, fmt.Errorf("prompt file %s: %w", path, err)
	}
	return prompts, nil
}

// parsePrompts reads prompt lines from r.
func parsePrompts(r io.Reader) ([]string, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []string
	for lineNo := 1; ; lineNo++ {
		line, err := readPromptLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if p, perr := parsePromptLine(line); perr != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, perr)
		} else if p != "" {
			out = append(out, p)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no prompts in file")
	}
	return out, nil
}

// readPromptLine returns one line without its newline, or io.EOF with the
// last (possibly empty) line.
func readPromptLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxPromptLine {
			return nil, fmt.Errorf("longer than %d bytes", maxPromptLine)
		}
		switch {
		case err == nil:
			return bytes.TrimRight(buf, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return bytes.TrimRight(buf, "\r\n"), io.EOF
		default:
			return nil, fmt.Errorf("read: %w", err)
		}
	}
}

// parsePromptLine turns one line into a prompt; "" (no error) for a blank
// line. A line starting with '{' must be a JSON object with a non-empty
// "prompt" string or "messages" list; a line that is not UTF-8 text (a
// binary file given by mistake) is an error.
func parsePromptLine(line []byte) (string, error) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return "", nil
	}
	if i := bytes.IndexByte(trimmed, 0); i >= 0 || !utf8.Valid(trimmed) {
		return "", errors.New("binary data (a NUL byte or invalid UTF-8), not text: a prompt file holds one prompt per line")
	}
	if trimmed[0] != '{' {
		return string(trimmed), nil
	}
	var obj struct {
		Prompt   *string `json:"prompt"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return "", fmt.Errorf("invalid JSON prompt: %w", err)
	}
	if obj.Prompt != nil {
		if strings.TrimSpace(*obj.Prompt) == "" {
			return "", errors.New(`empty "prompt"`)
		}
		return *obj.Prompt, nil
	}
	if len(obj.Messages) == 0 {
		return "", errors.New(`JSON prompt needs "prompt" or "messages"`)
	}
	var parts []string
	for i, m := range obj.Messages {
		text, err := messageText(m.Content)
		if err != nil {
			return "", fmt.Errorf("message %d: %w", i, err)
		}
		if text != "" {
			parts = append(parts, text)
		}
	}
	if len(parts) == 0 {
		return "", errors.New("messages carry no text")
	}
	return strings.Join(parts, "\n"), nil
}

// messageText returns a chat message's text: content is a string or a list
// of parts of which the "text" ones count.
func messageText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("content: %w", err)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content: want a string or a list of parts: %w", err)
	}
	var texts []string
	for _, p := range parts {
		if (p.Type == "text" || p.Type == "") && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}
