package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// Endpoint says how the calls made before a run (detection, the tokenize
// endpoint) reach the server under test.
type Endpoint struct {
	BaseURL string      // server root, e.g. http://127.0.0.1:8000; a trailing /v1 is accepted
	Header  http.Header // sent with every call: --header values and Authorization (see AuthHeader)
	// HTTPClient makes the calls; nil means http.DefaultClient. Redirects
	// follow CheckRedirect whatever the client's own policy.
	HTTPClient *http.Client
	// Timeout bounds each call, body included; 0 means DefaultCallTimeout.
	Timeout time.Duration
}

// DefaultCallTimeout bounds one call before the run when Endpoint.Timeout
// is zero.
const DefaultCallTimeout = 10 * time.Second

// ErrNoAnswer marks a call the server accepted or was sent but never
// answered within its timeout.
var ErrNoAnswer = errors.New("no answer")

// ErrUnauthorized marks a call the server refused for want of credentials
// (401 or 403).
var ErrUnauthorized = errors.New("credentials refused")

// ErrUnknownServer marks a server that answered, but not as any server
// Detect knows.
var ErrUnknownServer = errors.New("no known LLM server answered")

// endpoint is a checked Endpoint.
type endpoint struct {
	base    string // BaseURL without a trailing / or /v1
	shown   string // base without credentials, for messages
	header  http.Header
	secrets redactor
	hc      *http.Client
	timeout time.Duration
}

func (e Endpoint) check() (*endpoint, error) {
	if _, err := ParseBaseURL(e.BaseURL); err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(strings.TrimSuffix(e.BaseURL, "/"), "/v1")
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	return &endpoint{
		base: base, shown: event.RedactURL(base), header: e.Header, secrets: newRedactor(e.Header),
		hc: withRedirectPolicy(e.HTTPClient), timeout: timeout,
	}, nil
}

// answer is what one call brought back.
type answer struct {
	status      int
	contentType string
	body        []byte
}

// call sends method path (with body, JSON, when not nil) and reads up to
// limit bytes of the answer. Its errors name the call, never the URL, and
// wrap ErrNoAnswer when the server did not answer in time.
func (e *endpoint) call(ctx context.Context, method, path string, body []byte, limit int64) (answer, error) {
	name := method + " " + path
	ctx, cancel := context.WithTimeoutCause(ctx, e.timeout, ErrNoAnswer)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.base+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("%s: %s", name, describeError(err))
	}
	for k, vs := range e.header {
		req.Header[k] = vs[:len(vs):len(vs)]
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.hc.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var data []byte
		data, err = io.ReadAll(io.LimitReader(resp.Body, limit))
		if err == nil {
			return answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: data}, nil
		}
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrNoAnswer):
		return answer{}, fmt.Errorf("%s: %w within %s", name, ErrNoAnswer, e.timeout)
	case cause != nil:
		return answer{}, fmt.Errorf("%s: %w", name, cause)
	}
	return answer{}, fmt.Errorf("%s: %s", name, e.secrets.clean(describeError(err)))
}

// statusError describes an answer that is not 2xx, wrapping
// ErrUnauthorized for 401 and 403.
func (e *endpoint) statusError(name string, a answer) error {
	text := fmt.Sprintf("%s answered %d %s", name, a.status, http.StatusText(a.status))
	if msg := e.secrets.clean(answerMessage(a.body)); msg != "" {
		text += ": " + msg
	}
	if a.status == http.StatusUnauthorized || a.status == http.StatusForbidden {
		return fmt.Errorf("%w: %s", ErrUnauthorized, text)
	}
	return errors.New(text)
}

// answerMessage is the error message of a JSON error body, else the
// start of the body on one line.
func answerMessage(body []byte) string {
	if msg := bodyErrorMessage(body); msg != "" {
		return excerpt([]byte(msg), 200)
	}
	return excerpt([]byte(strings.Join(strings.Fields(string(body)), " ")), 200)
}
