package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/latscope/latscope/event"
)

// A Tokenizer counts tokens the way the server under test does. Prompt
// calibration uses it so generated prompts hit their target length in the
// server's own tokenizer.
type Tokenizer interface {
	Count(ctx context.Context, text string) (int, error)
}

// TokenizeAPI names the request body a server's tokenize endpoint expects.
type TokenizeAPI string

// The tokenize endpoints latscope knows. SGLang has no reliable one: use no
// tokenizer there and let usage correct the prompts.
const (
	TokenizeVLLM     TokenizeAPI = "vllm"     // vLLM and the simulator: POST /tokenize {"model","prompt"} → {"count":N,...}
	TokenizeLlamaCpp TokenizeAPI = "llamacpp" // llama.cpp: POST /tokenize {"content"} → {"tokens":[...]}
	TokenizeTGI      TokenizeAPI = "tgi"      // TGI: POST /tokenize {"inputs"} → [{"id":..},...]
)

// maxTokenizeResponse bounds a tokenize response; TGI returns one object per
// token, so a long prompt's answer is large but never this large.
const maxTokenizeResponse = 32 << 20

// HTTPTokenizer counts tokens with a server's tokenize endpoint.
type HTTPTokenizer struct {
	ep    *endpoint
	model string
	api   TokenizeAPI
}

var _ Tokenizer = (*HTTPTokenizer)(nil)

// tokenizePath is the tokenize endpoint of every known API.
const tokenizePath = "/tokenize"

// NewHTTPTokenizer returns a tokenizer for the server at ep. model is sent
// where the API wants one.
func NewHTTPTokenizer(ep Endpoint, model string, api TokenizeAPI) (*HTTPTokenizer, error) {
	switch api {
	case TokenizeVLLM, TokenizeLlamaCpp, TokenizeTGI:
	default:
		return nil, fmt.Errorf("unknown tokenize api %q: want vllm, llamacpp or tgi", api)
	}
	e, err := ep.check()
	if err != nil {
		return nil, err
	}
	return &HTTPTokenizer{ep: e, model: model, api: api}, nil
}

// DetectTokenizer tries each known tokenize API at ep and returns the first
// that answers with a plausible count, or an error saying why none did. A
// server that does not answer at all is asked once, not once per API.
func DetectTokenizer(ctx context.Context, ep Endpoint, model string) (*HTTPTokenizer, error) {
	const probeText = "latscope tokenizer probe: one two three"
	var errs []error
	for _, api := range []TokenizeAPI{TokenizeVLLM, TokenizeLlamaCpp, TokenizeTGI} {
		t, err := NewHTTPTokenizer(ep, model, api)
		if err != nil {
			return nil, err
		}
		n, err := t.Count(ctx, probeText)
		if err == nil && (n < 1 || n > len(probeText)+8) {
			// llama.cpp answers any body with {"tokens":[]}; a count of
			// zero for a non-empty text means the body was not understood.
			err = fmt.Errorf("implausible count %d", n)
		}
		if err == nil {
			return t, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrNoAnswer) {
			return nil, fmt.Errorf("no tokenize endpoint at %s: %w", t.ep.shown, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", api, err))
	}
	return nil, fmt.Errorf("no tokenize endpoint at %s: %w", event.RedactURL(ep.BaseURL), errors.Join(errs...))
}

// API returns the tokenize API in use.
func (t *HTTPTokenizer) API() TokenizeAPI { return t.api }

// Count implements Tokenizer.
func (t *HTTPTokenizer) Count(ctx context.Context, text string) (int, error) {
	var body any
	switch t.api {
	case TokenizeVLLM:
		body = map[string]string{"model": t.model, "prompt": text}
	case TokenizeLlamaCpp:
		body = map[string]string{"content": text}
	case TokenizeTGI:
		body = map[string]string{"inputs": text}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("tokenize: encode body: %w", err)
	}
	const name = "POST " + tokenizePath
	a, err := t.ep.call(ctx, http.MethodPost, tokenizePath, b, maxTokenizeResponse+1)
	switch {
	case err != nil:
		return 0, err
	case a.status/100 != 2:
		return 0, t.ep.statusError(name, a)
	case len(a.body) > maxTokenizeResponse:
		return 0, fmt.Errorf("%s: answer larger than %d bytes", name, maxTokenizeResponse)
	}
	n, err := parseTokenCount(a.body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// parseTokenCount reads any of the known tokenize answers: an object with
// "count" (vLLM) or "tokens" (vLLM, llama.cpp), or a bare array (TGI).
func parseTokenCount(data []byte) (int, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(data, &arr); err != nil {
			return 0, fmt.Errorf("decode token list: %w", err)
		}
		return len(arr), nil
	}
	var obj struct {
		Count  *int              `json:"count"`
		Tokens []json.RawMessage `json:"tokens"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return 0, fmt.Errorf("decode tokenize response: %w", err)
	}
	switch {
	case obj.Count != nil:
		return *obj.Count, nil
	case obj.Tokens != nil:
		return len(obj.Tokens), nil
	}
	return 0, fmt.Errorf("tokenize response has neither count nor tokens: %s", tokenizeBodySnippet(data))
}

// tokenizeBodySnippet shortens a response body for an error message.
func tokenizeBodySnippet(b []byte) string {
	const n = 200
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
