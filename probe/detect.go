package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// Detected is what Detect learned about a server.
type Detected struct {
	Server  string   // vllm, sglang, tgi, llamacpp, ollama, latscope-sim or openai (an unrecognised OpenAI-compatible server)
	Dialect string   // the default dialect for that server
	Models  []string // models the server lists; the first is the default --model
}

// ServerLatscopeSim is the server kind Detect reports for latscope's own
// simulator: everything measured against it describes the simulator.
const ServerLatscopeSim = "latscope-sim"

// detectTimeout bounds each endpoint probe; they run in parallel, so
// Detect takes at most about this long.
const detectTimeout = 2 * time.Second

// detectBodyLimit bounds the body read from each endpoint.
const detectBodyLimit = 1 << 20

// Detect finds which server runs at baseURL by asking the endpoints each
// server has of its own: /v1/models for the model list; vLLM
// /version and owned_by "vllm"; SGLang /get_model_info and
// /get_server_info; TGI /info; llama.cpp /props and /slots; Ollama
// /api/version and /api/tags. hc nil means http.DefaultClient. It never
// takes much longer than detectTimeout.
func Detect(ctx context.Context, hc *http.Client, baseURL string) (Detected, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	base := strings.TrimSuffix(strings.TrimSuffix(baseURL, "/"), "/v1")
	paths := []string{"/v1/models", "/version", "/get_model_info", "/get_server_info",
		"/info", "/props", "/slots", "/api/version", "/api/tags"}
	bodies := make(map[string][]byte, len(paths))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Go(func() {
			b, ok := fetchJSON(ctx, hc, base+p)
			if ok {
				mu.Lock()
				bodies[p] = b
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Detected{}, fmt.Errorf("detect %s: %w", baseURL, err)
	}
	d, ok := classifyServer(bodies)
	if !ok {
		return Detected{}, fmt.Errorf("detect %s: no known LLM server answered (tried %s)", baseURL, strings.Join(paths, ", "))
	}
	return d, nil
}

// fetchJSON GETs url and returns its body when the status is 200 and the
// body is JSON.
func fetchJSON(ctx context.Context, hc *http.Client, url string) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(ctx, detectTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, detectBodyLimit))
	if err != nil || resp.StatusCode != http.StatusOK || !json.Valid(b) {
		return nil, false
	}
	return b, true
}

// classifyServer decides from the endpoint bodies, most specific first.
func classifyServer(bodies map[string][]byte) (Detected, bool) {
	models, owners := openAIModels(bodies["/v1/models"])
	has := func(path string, keys ...string) bool {
		var m map[string]json.RawMessage
		if json.Unmarshal(bodies[path], &m) != nil {
			return false
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				return false
			}
		}
		return true
	}
	str := func(path, key string) string {
		var m map[string]any
		_ = json.Unmarshal(bodies[path], &m)
		s, _ := m[key].(string)
		return s
	}
	d := Detected{Models: models}
	switch {
	case has("/api/version", "version") || has("/api/tags", "models"):
		d.Server, d.Dialect = "ollama", DialectOllamaGenerate
		if len(d.Models) == 0 {
			d.Models = ollamaTags(bodies["/api/tags"])
		}
	case has("/info", "model_id", "router"):
		d.Server, d.Dialect = "tgi", DialectTGI
		if len(d.Models) == 0 {
			d.Models = nonEmpty(str("/info", "model_id"))
		}
	case has("/props", "default_generation_settings") || has("/props", "total_slots") || isJSONArray(bodies["/slots"]):
		d.Server, d.Dialect = "llamacpp", DialectLlamaCpp
		if p := str("/props", "model_path"); len(d.Models) == 0 && p != "" {
			d.Models = []string{path.Base(p)}
		}
	case has("/get_model_info", "model_path") || has("/get_server_info"):
		d.Server, d.Dialect = "sglang", DialectOpenAIChat
		if len(d.Models) == 0 {
			d.Models = nonEmpty(str("/get_model_info", "model_path"))
		}
	case owners["latscope-sim"]:
		// latscope's own simulator speaks vLLM's API and metrics.
		d.Server, d.Dialect = ServerLatscopeSim, DialectOpenAIChat
	case owners["vllm"] || (has("/version", "version") && bodies["/v1/models"] != nil):
		d.Server, d.Dialect = "vllm", DialectOpenAIChat
	case bodies["/v1/models"] != nil:
		d.Server, d.Dialect = "openai", DialectOpenAIChat
	default:
		return Detected{}, false
	}
	return d, true
}

// openAIModels reads a /v1/models list: the ids and the owned_by values.
func openAIModels(b []byte) ([]string, map[string]bool) {
	var list struct {
		Data []struct {
			ID      string `json:"id"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	owners := map[string]bool{}
	if json.Unmarshal(b, &list) != nil {
		return nil, owners
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
		owners[strings.ToLower(m.OwnedBy)] = true
	}
	return ids, owners
}

func ollamaTags(b []byte) []string {
	var tags struct {
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if json.Unmarshal(b, &tags) != nil {
		return nil
	}
	var out []string
	for _, m := range tags.Models {
		if m.Name != "" {
			out = append(out, m.Name)
		} else if m.Model != "" {
			out = append(out, m.Model)
		}
	}
	return out
}

func isJSONArray(b []byte) bool {
	var a []json.RawMessage
	return json.Unmarshal(b, &a) == nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
