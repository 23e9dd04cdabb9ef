package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	url   string
	model string
	api   TokenizeAPI
	hc    *http.Client
}

var _ Tokenizer = (*HTTPTokenizer)(nil)

// NewHTTPTokenizer returns a tokenizer for the server at baseURL (with or
// without a trailing /v1). model is sent where the API wants one. A nil hc
// means http.DefaultClient.
func NewHTTPTokenizer(baseURL, model string, api TokenizeAPI, hc *http.Client) (*HTTPTokenizer, error) {
	switch api {
	case TokenizeVLLM, TokenizeLlamaCpp, TokenizeTGI:
	default:
		return nil, fmt.Errorf("unknown tokenize api %q: want vllm, llamacpp or tgi", api)
	}
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("tokenizer base url %q: want http:// or https://", baseURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	base := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1")
	return &HTTPTokenizer{url: base + "/tokenize", model: model, api: api, hc: hc}, nil
}

// DetectTokenizer tries each known tokenize API at baseURL and returns the
// first that answers with a plausible count, or an error saying none did.
func DetectTokenizer(ctx context.Context, baseURL, model string, hc *http.Client) (*HTTPTokenizer, error) {
	const probeText = "latscope tokenizer probe: one two three"
	var errs []error
	for _, api := range []TokenizeAPI{TokenizeVLLM, TokenizeLlamaCpp, TokenizeTGI} {
		t, err := NewHTTPTokenizer(baseURL, model, api, hc)
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
		errs = append(errs, fmt.Errorf("%s: %w", api, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("no tokenize endpoint at %s: %w", baseURL, errors.Join(errs...))
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("tokenize %s: %w", t.url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("tokenize %s: %w", t.url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenizeResponse+1))
	if err != nil {
		return 0, fmt.Errorf("tokenize %s: read response: %w", t.url, err)
	}
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("tokenize %s: status %d: %s", t.url, resp.StatusCode, tokenizeBodySnippet(data))
	}
	if len(data) > maxTokenizeResponse {
		return 0, fmt.Errorf("tokenize %s: response larger than %d bytes", t.url, maxTokenizeResponse)
	}
	n, err := parseTokenCount(data)
	if err != nil {
		return 0, fmt.Errorf("tokenize %s: %w", t.url, err)
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
