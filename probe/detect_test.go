package probe

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
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
		{"llm-d-inference-sim", map[string]string{
			"/v1/models":    `{"object":"list","data":[{"id":"Qwen/Qwen2.5-0.5B-Instruct","object":"model","created":1796048757,"owned_by":"vllm","root":"Qwen/Qwen2.5-0.5B-Instruct","parent":null,"max_model_len":4096}]}`,
			"/admin/config": `{"DisplayModelName":"Qwen/Qwen2.5-0.5B-Instruct","max-num-seqs":4,"time-to-first-token":"100ms","inter-token-latency":"10ms","fake-metrics":null,"failure-injection-rate":0}`,
		}, ServerLlmdSim, DialectOpenAIChat, "Qwen/Qwen2.5-0.5B-Instruct"},
		{"vllm with an admin page of other settings", map[string]string{
			"/v1/models":    `{"object":"list","data":[{"id":"m","object":"model","owned_by":"vllm"}]}`,
			"/admin/config": `{"max-num-seqs":4}`,
		}, "vllm", DialectOpenAIChat, "m"},
		{"openai compatible", map[string]string{
			"/v1/models": `{"object":"list","data":[{"id":"my-model","object":"model","owned_by":"someone"}]}`,
		}, "openai", DialectOpenAIChat, "my-model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := wireEndpointServer(t, tt.routes)
			got, err := Detect(context.Background(), Endpoint{BaseURL: url})
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
		if got, err := Detect(context.Background(), Endpoint{BaseURL: url}); err == nil {
			t.Errorf("%s: detected %+v, want an error", url, got)
		} else if !strings.Contains(err.Error(), "no known LLM server") {
			t.Errorf("error %v", err)
		}
	}
}

// TestDetectDoesNotHang: an endpoint that never answers costs at most the
// per-endpoint timeout (twice: the routes asked after a bare OpenAI model
// list), and the others still decide.
func TestDetectDoesNotHang(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_, _ = w.Write([]byte(`{"data":[{"id":"m","owned_by":"x"}]}`))
			return
		}
		// Read the body (Detect's POSTs have one): only then does the
		// server notice the client going away, and end r's context.
		_, _ = io.Copy(io.Discard, r.Body)
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
		got, err = Detect(context.Background(), Endpoint{BaseURL: srv.URL, Timeout: time.Second})
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

// keyedServer answers like an OpenAI-compatible server, with /tokenize,
// only to requests carrying X-Api-Key: key; others get 401.
func keyedServer(t *testing.T, key string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"missing or invalid API key"}}`))
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			_, _ = w.Write([]byte(`{"data":[{"id":"gw-model","owned_by":"gateway"}]}`))
		case "/tokenize":
			_, _ = w.Write([]byte(`{"count":7}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDetectSendsCredentials: a gateway that wants a key is found when the
// key is given, and said to refuse it when not.
func TestDetectSendsCredentials(t *testing.T) {
	t.Parallel()
	srv := keyedServer(t, "gw-secret-1")
	key := http.Header{"X-Api-Key": {"gw-secret-1"}}
	got, err := Detect(t.Context(), Endpoint{BaseURL: srv.URL, Header: key})
	if err != nil || got.Server != "openai" || got.Models[0] != "gw-model" {
		t.Fatalf("with the key: %+v, %v", got, err)
	}
	if _, err := DetectTokenizer(t.Context(), Endpoint{BaseURL: srv.URL, Header: key}, "gw-model"); err != nil {
		t.Fatalf("tokenizer with the key: %v", err)
	}
	_, err = Detect(t.Context(), Endpoint{BaseURL: srv.URL})
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "GET /v1/models answered 401 Unauthorized: missing or invalid API key") {
		t.Fatalf("without the key: %v, want a 401 on /v1/models", err)
	}
}

// TestDetectSaysWhy: every way detection can fail has its own message, and
// none shows the URL's credentials.
func TestDetectSaysWhy(t *testing.T) {
	t.Parallel()
	refused := "http://user:pw-secret@" + refusedAddr // nothing listens there

	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })

	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	noSuchHost := &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}}}

	tests := []struct {
		name string
		ep   Endpoint
		want string
		is   error
	}{
		{"malformed", Endpoint{BaseURL: "http://user:pw-secret@[::1"}, "URL REDACTED@[::1: missing ']' in host", nil},
		{"scheme", Endpoint{BaseURL: "ftp://host"}, `want http:// or https://, not "ftp:"`, nil},
		{"refused", Endpoint{BaseURL: refused}, "GET /v1/models: connection refused by " + refusedAddr, nil},
		{"unknown name", Endpoint{BaseURL: "http://llm.invalid:8000", HTTPClient: noSuchHost}, "unknown host llm.invalid: the name does not resolve", nil},
		{"untrusted certificate", Endpoint{BaseURL: tlsSrv.URL}, "certificate is signed by an authority latscope does not trust (trust it with --ca-cert FILE", nil},
		{"silent", Endpoint{BaseURL: "http://" + silent.Addr().String(), Timeout: 200 * time.Millisecond}, "GET /v1/models: no answer within 200ms", ErrNoAnswer},
		{"not an LLM server", Endpoint{BaseURL: tlsSrv.URL, HTTPClient: tlsSrv.Client()}, "no known LLM server answered: /v1/models 404, /version 404", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Detect(t.Context(), tt.ep)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
			if strings.Contains(err.Error(), "pw-secret") {
				t.Errorf("error %v shows the password", err)
			}
		})
	}
}

// TestDetectTokenizerAsksASilentServerOnce: a server that never answers
// costs one call's timeout, not one per tokenize API.
func TestDetectTokenizerAsksASilentServerOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	_, err = DetectTokenizer(t.Context(), Endpoint{BaseURL: "http://" + ln.Addr().String(), Timeout: 100 * time.Millisecond}, "m")
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "POST /tokenize: no answer within 100ms") {
		t.Fatalf("error %v, want no answer from POST /tokenize", err)
	}
	_ = ln.Close()
	n := 0
	for c := range accepted {
		n++
		_ = c.Close()
	}
	if n != 1 {
		t.Fatalf("%d connections, want 1: a silent server is asked once", n)
	}
}
