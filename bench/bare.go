package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxBareLine bounds one SSE line the bare client will assemble.
const maxBareLine = 1 << 20

// BareClient is the floor the probe is measured against: plain net/http, a
// bufio.Reader.ReadSlice('\n') loop over the SSE body, one time.Now per data
// line, and a count of the lines that carry content. Nothing else: no JSON
// decoding of chunks, no httptrace, no stages.
type BareClient struct {
	url   string
	model string
	hc    *http.Client
}

// NewBareClient returns a bare client for an OpenAI-compatible chat
// completions endpoint under baseURL (e.g. "http://127.0.0.1:8000").
func NewBareClient(baseURL, model string, hc *http.Client) *BareClient {
	if hc == nil {
		hc = &http.Client{Transport: NewPlainTransport()}
	}
	return &BareClient{url: strings.TrimSuffix(baseURL, "/") + "/v1/chat/completions", model: model, hc: hc}
}

// BareFactory is the ClientFactory of the bare client, each instance with its
// own transport so its connection pool is not shared with the probe's.
func BareFactory(model string) ClientFactory {
	return ClientFactory{Name: "bare", New: func(baseURL string) (Streamer, error) {
		return NewBareClient(baseURL, model, &http.Client{Transport: NewPlainTransport()}), nil
	}}
}

type bareMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type bareBody struct {
	Model     string        `json:"model"`
	Messages  []bareMessage `json:"messages"`
	MaxTokens int           `json:"max_tokens"`
	MinTokens int           `json:"min_tokens"`
	IgnoreEOS bool          `json:"ignore_eos"`
	Stream    bool          `json:"stream"`
}

// Stream sends one chat completion with stream=true and timestamps every
// content line of the response.
func (c *BareClient) Stream(ctx context.Context, req StreamRequest) Trace {
	tr := Trace{Start: time.Now()}
	body, err := json.Marshal(bareBody{
		Model:     c.model,
		Messages:  []bareMessage{{Role: "user", Content: req.Prompt}},
		MaxTokens: req.OutputTokens, MinTokens: req.OutputTokens, IgnoreEOS: true, Stream: true,
	})
	if err != nil {
		tr.Err = fmt.Errorf("encode request: %w", err)
		return tr
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		tr.Err = fmt.Errorf("build request: %w", err)
		return tr
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if req.ID != "" {
		hreq.Header.Set("X-Request-Id", req.ID)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		tr.Err = fmt.Errorf("post %s: %w", c.url, err)
		return tr
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tr.Err = fmt.Errorf("post %s: status %d", c.url, resp.StatusCode)
		return tr
	}
	tr.offsets = make([]time.Duration, 0, max(req.OutputTokens, 0))
	tr.offsets, tr.Err = readBareStream(resp.Body, tr.Start, tr.offsets)
	return tr
}

// readBareStream reads SSE lines until [DONE] or the end of the body and
// appends the arrival offset of every content line to offsets.
func readBareStream(body io.Reader, start time.Time, offsets []time.Duration) ([]time.Duration, error) {
	r := bufio.NewReader(body)
	var long []byte // assembles a line longer than the reader's buffer
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(line) > maxBareLine {
				return offsets, fmt.Errorf("sse line longer than %d bytes", maxBareLine)
			}
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
			if len(line) > maxBareLine {
				return offsets, fmt.Errorf("sse line longer than %d bytes", maxBareLine)
			}
		}
		if payload, ok := dataPayload(line); ok {
			at := time.Since(start)
			if bytes.Equal(payload, doneMarker) {
				// Read the rest (the chunked terminator) so the connection
				// goes back to the pool, as any keep-alive client must.
				_, _ = io.Copy(io.Discard, io.LimitReader(r, 64<<10))
				return offsets, nil
			}
			if hasContent(payload) {
				offsets = append(offsets, at)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return offsets, nil
			}
			return offsets, fmt.Errorf("read stream: %w", err)
		}
	}
}

var (
	dataPrefix    = []byte("data:")
	doneMarker    = []byte("[DONE]")
	contentKey    = []byte(`"content":`)
	textKey       = []byte(`"text":`)
	reasoningKey  = []byte(`"reasoning_content":`)
	emptyStrBegin = byte('"')
)

// dataPayload returns the value of an SSE data line, without the optional
// space after the colon and without the line ending.
func dataPayload(line []byte) ([]byte, bool) {
	if !bytes.HasPrefix(line, dataPrefix) {
		return nil, false
	}
	p := line[len(dataPrefix):]
	if len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	p = bytes.TrimRight(p, "\r\n")
	return p, true
}

// hasContent reports whether a chunk carries a non-empty "content" (chat),
// "reasoning_content" or "text" (completions) string. It looks at the bytes
// only: a bare client does not decode JSON. Keys inside string values are
// escaped (\"content\":), so they cannot match.
func hasContent(payload []byte) bool {
	return nonEmptyString(payload, contentKey) || nonEmptyString(payload, textKey) || nonEmptyString(payload, reasoningKey)
}

func nonEmptyString(payload, key []byte) bool {
	i := bytes.Index(payload, key)
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(payload[i+len(key):], " ")
	return len(rest) >= 2 && rest[0] == emptyStrBegin && rest[1] != '"'
}
