package probe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// anthropicModelList is Anthropic's /v1/models answer.
const anthropicModelList = `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-sonnet-4-5"}`

// routeServer answers each "METHOD /path" with a status and JSON body,
// and 404 elsewhere; key, when set, is the x-api-key it wants (anything
// else gets Anthropic's 401). It records the headers it was sent.
type routeServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

type route struct {
	status int
	body   string
}

func newRouteServer(t *testing.T, key string, routes map[string]route) *routeServer {
	t.Helper()
	rs := &routeServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.headers = append(rs.headers, r.Header.Clone())
		rs.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if key != "" && r.Header.Get("X-Api-Key") != key {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
			return
		}
		rt, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`))
			return
		}
		w.WriteHeader(rt.status)
		_, _ = w.Write([]byte(rt.body))
	}))
	t.Cleanup(rs.Close)
	return rs
}

const (
	anthropicInvalid = `{"type":"error","error":{"type":"invalid_request_error","message":"model: Field required"}}`
	openAIInvalid    = `{"error":{"message":"you must provide a model parameter","type":"invalid_request_error"}}`
)

// Detection: a model list in Anthropic's shape, or a server with the
// Messages route and not OpenAI's chat route, is anthropic-messages; a
// server with both stays OpenAI (or is itself: vLLM), and a server whose
// Messages route answers 401 says the key was refused.
func TestDetectAnthropic(t *testing.T) {
	t.Parallel()
	openAIList := `{"object":"list","data":[{"id":"gw-model","object":"model","owned_by":"gateway"}]}`
	tests := []struct {
		name        string
		routes      map[string]route
		wantServer  string
		wantDialect string
		wantModels  int
	}{
		{"anthropic model list", map[string]route{"GET /v1/models": {200, anthropicModelList}}, ServerAnthropic, DialectAnthropicMessages, 1},
		{"empty anthropic model list", map[string]route{"GET /v1/models": {200, `{"data":[],"has_more":false}`}}, ServerAnthropic, DialectAnthropicMessages, 0},
		{"messages route only", map[string]route{"POST /v1/messages": {400, anthropicInvalid}}, ServerAnthropic, DialectAnthropicMessages, 0},
		{"openai model list, messages route only", map[string]route{
			"GET /v1/models":    {200, openAIList},
			"POST /v1/messages": {400, anthropicInvalid},
		}, ServerAnthropic, DialectAnthropicMessages, 1},
		{"openai model list, both routes", map[string]route{
			"GET /v1/models":            {200, openAIList},
			"POST /v1/messages":         {400, anthropicInvalid},
			"POST /v1/chat/completions": {400, openAIInvalid},
		}, ServerOpenAI, DialectOpenAIChat, 1},
		{"vllm, both routes", map[string]route{
			"GET /v1/models":            {200, `{"object":"list","data":[{"id":"m","object":"model","owned_by":"vllm"}]}`},
			"POST /v1/messages":         {400, anthropicInvalid},
			"POST /v1/chat/completions": {400, openAIInvalid},
		}, "vllm", DialectOpenAIChat, 1},
		{"openai model list, chat route only", map[string]route{
			"GET /v1/models":            {200, openAIList},
			"POST /v1/chat/completions": {400, openAIInvalid},
		}, ServerOpenAI, DialectOpenAIChat, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newRouteServer(t, "", tt.routes)
			got, err := Detect(t.Context(), Endpoint{BaseURL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.wantServer || got.Dialect != tt.wantDialect || len(got.Models) != tt.wantModels {
				t.Errorf("got %+v, want %s %s with %d models", got, tt.wantServer, tt.wantDialect, tt.wantModels)
			}
		})
	}
}

// Anthropic answers even its model list only to x-api-key and
// anthropic-version: detection sends the bearer key (--api-key) as
// x-api-key too, and without a key is told the key was refused.
func TestDetectAnthropicCredentials(t *testing.T) {
	t.Parallel()
	srv := newRouteServer(t, "sk-ant-secret-key", map[string]route{"GET /v1/models": {200, anthropicModelList}})
	auth, err := AuthHeader("sk-ant-secret-key", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Detect(t.Context(), Endpoint{BaseURL: srv.URL, Header: auth})
	if err != nil || got.Dialect != DialectAnthropicMessages || got.Models[0] != "claude-sonnet-4-5" {
		t.Fatalf("with the key: %+v, %v", got, err)
	}
	srv.mu.Lock()
	h := srv.headers[0]
	srv.mu.Unlock()
	if h.Get("Anthropic-Version") != anthropicVersion {
		t.Errorf("detection sent headers %v", h)
	}
	_, err = Detect(t.Context(), Endpoint{BaseURL: srv.URL})
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "invalid x-api-key") {
		t.Errorf("without the key: %v", err)
	}
	if strings.Contains(err.Error(), "sk-ant-secret-key") {
		t.Errorf("error %v shows the key", err)
	}

	// Only the Messages route, and it refuses the key.
	refusing := newRouteServer(t, "", map[string]route{"POST /v1/messages": {401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}})
	_, err = Detect(context.Background(), Endpoint{BaseURL: refusing.URL})
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "POST /v1/messages answered 401") {
		t.Errorf("messages route refusing the key: %v", err)
	}
}

// A server that answers neither route stays unknown, and the error says
// what the two routes answered.
func TestDetectAnthropicNothing(t *testing.T) {
	t.Parallel()
	srv := newRouteServer(t, "", nil)
	_, err := Detect(t.Context(), Endpoint{BaseURL: srv.URL})
	if !errors.Is(err, ErrUnknownServer) || !strings.Contains(err.Error(), "POST /v1/messages 404, POST /v1/chat/completions 404") {
		t.Errorf("error %v", err)
	}
}
