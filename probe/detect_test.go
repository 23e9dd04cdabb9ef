package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// wireEndpointServer answers GETs on the given paths with fixed JSON and 404
// elsewhere.
func wireEndpointServer(t *testing.T, routes map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := routes[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDetect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		routes      map[string]string
		wantServer  string
		wantDialect string
		wantModel   string
	}{
		{"vllm", map[string]string{
			"/v1/models": `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model","created":1767000000,"owned_by":"vllm","root":"meta-llama/Llama-3.1-8B-Instruct","max_model_len":8192}]}`,
			"/version":   `{"version":"0.11.0"}`,
		}, "vllm", DialectOpenAIChat, "meta-llama/Llama-3.1-8B-Instruct"},
		{"sglang", map[string]string{
			"/v1/models":      `{"object":"list","data":[{"id":"Qwen/Qwen2.5-7B-Instruct","object":"model","owned_by":"sglang"}]}`,
			"/get_model_info": `{"model_path":"Qwen/Qwen2.5-7B-Instruct","tokenizer_path":"Qwen/Qwen2.5-7B-Instruct","is_generation":true}`,
		}, "sglang", DialectOpenAIChat, "Qwen/Qwen2.5-7B-Instruct"},
		{"tgi", map[string]string{
			"/info": `{"model_id":"bigscience/bloom-560m","model_sha":"abc","model_dtype":"torch.float16","router":"text-generation-router","version":"3.3.0","max_input_tokens":1024}`,
		}, "tgi", DialectTGI, "bigscience/bloom-560m"},
		{"llamacpp", map[string]string{
			"/v1/models": `{"object":"list","data":[{"id":"qwen2.5-0.5b-q8_0.gguf","object":"model","owned_by":"llamacpp"}]}`,
			"/props":     `{"default_generation_settings":{"n_ctx":4096},"total_slots":4,"model_path":"/models/qwen2.5-0.5b-q8_0.gguf"}`,
			"/slots":     `[{"id":0,"is_processing":false}]`,
		}, "llamacpp", DialectLlamaCpp, "qwen2.5-0.5b-q8_0.gguf"},
		{"ollama", map[string]string{
			"/api/version": `{"version":"0.12.3"}`,
			"/api/tags":    `{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest","size":2019393189}]}`,
		}, "ollama", DialectOllamaGenerate, "llama3.2:latest"},
		{"openai compatible", map[string]string{
			"/v1/models": `{"object":"list","data":[{"id":"my-model","object":"model","owned_by":"someone"}]}`,
		}, "openai", DialectOpenAIChat, "my-model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := wireEndpointServer(t, tt.routes)
			got, err := Detect(context.Background(), nil, url)
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.wantServer || got.Dialect != tt.wantDialect || len(got.Models) == 0 || got.Models[0] != tt.wantModel {
				t.Errorf("got %+v, want %s %s %s", got, tt.wantServer, tt.wantDialect, tt.wantModel)
			}
		})
	}
}

func TestDetectNothing(t *testing.T) {
	t.Parallel()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	defer html.Close()
	for _, url := range []string{wireEndpointServer(t, nil), html.URL} {
		if got, err := Detect(context.Background(), nil, url); err == nil {
			t.Errorf("%s: detected %+v, want an error", url, got)
		} else if !strings.Contains(err.Error(), "no known LLM server") {
			t.Errorf("error %v", err)
		}
	}
}

// TestDetectDoesNotHang: an endpoint that never answers costs at most the
// per-endpoint timeout, and the others still decide.
func TestDetectDoesNotHang(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_, _ = w.Write([]byte(`{"data":[{"id":"m","owned_by":"x"}]}`))
			return
		}
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	defer srv.Close()
	done := make(chan struct{})
	var got Detected
	var err error
	go func() {
		defer close(done)
		got, err = Detect(context.Background(), nil, srv.URL)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Detect did not return")
	}
	if err != nil || got.Server != "openai" {
		t.Errorf("got %+v, %v", got, err)
	}
}
