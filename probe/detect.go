package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
)

// Detected is what Detect learned about a server.
type Detected struct {
	Server  string   // vllm, sglang, tgi, llamacpp, ollama, latscope-sim (or -slotted, -first-token), llm-d-sim or openai (an unrecognised OpenAI-compatible server)
	Dialect string   // the default dialect for that server
	Models  []string // models the server lists; the first is the default --model
}

// ServerLatscopeSim is the server kind Detect reports for latscope's own
// simulator: everything measured against it describes the simulator.
const ServerLatscopeSim = "latscope-sim"

// Server kinds of the simulator in its other header timings (sim
// --headers): their waits for the headers hold different stages.
const (
	// ServerLatscopeSimSlotted sends a stream's headers when a batch slot
	// takes the request, as llama-server does.
	ServerLatscopeSimSlotted = ServerLatscopeSim + "-slotted"
	// ServerLatscopeSimFirstToken sends them with the first token, as
	// llm-d's simulator does.
	ServerLatscopeSimFirstToken = ServerLatscopeSim + "-first-token"
)

// IsLatscopeSim reports whether a server kind is latscope's simulator, in
// any of its modes.
func IsLatscopeSim(server string) bool {
	return server == ServerLatscopeSim || server == ServerLatscopeSimSlotted || server == ServerLatscopeSimFirstToken
}

// ServerLlmdSim is the server kind Detect reports for llm-d's inference
// simulator (llm-d-inference-sim): it speaks vLLM's API and metrics, and
// says owned_by "vllm", but its latencies are configured, not a model's,
// and it sends a stream's headers with the first token.
const ServerLlmdSim = "llm-d-sim"

// detectBodyLimit bounds the body read from each endpoint.
const detectBodyLimit = 1 << 20

// detectPaths are the endpoints Detect asks, in the order its errors name
// them.
var detectPaths = []string{"/v1/models", "/version", "/get_model_info", "/get_server_info",
	"/info", "/props", "/slots", "/api/version", "/api/tags", "/admin/config"}

// Detect finds which server runs at ep by asking the endpoints each server
// has of its own: /v1/models for the model list; vLLM /version and owned_by
// "vllm"; SGLang /get_model_info and /get_server_info; TGI /info; llama.cpp
// /props and /slots; Ollama /api/version and /api/tags; llm-d's simulator
// /admin/config (its own settings: a latency to simulate). The calls run in
// parallel, each bounded by ep's timeout, so Detect takes about that long
// at most. When no server is recognised the error says why: the network
// cause, a refused key (wrapping ErrUnauthorized), silence (wrapping
// ErrNoAnswer), or what each endpoint answered (wrapping ErrUnknownServer). The errors name the
// endpoints, not the base URL, which the caller knows.
func Detect(ctx context.Context, ep Endpoint) (Detected, error) {
	e, err := ep.check()
	if err != nil {
		return Detected{}, err
	}
	answers := make([]answer, len(detectPaths))
	errs := make([]error, len(detectPaths))
	var wg sync.WaitGroup
	for i, p := range detectPaths {
		wg.Go(func() { answers[i], errs[i] = e.call(ctx, http.MethodGet, p, nil, detectBodyLimit) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return Detected{}, context.Cause(ctx)
	}
	bodies := make(map[string][]byte, len(detectPaths))
	for i, a := range answers {
		if errs[i] == nil && a.status == http.StatusOK && json.Valid(a.body) {
			bodies[detectPaths[i]] = a.body
		}
	}
	if d, ok := classifyServer(bodies); ok {
		return d, nil
	}
	return Detected{}, e.detectFailure(answers, errs)
}

// detectFailure says why no endpoint identified a server: a refused key
// first, then a network failure that every call shared, then what each
// endpoint answered.
func (e *endpoint) detectFailure(answers []answer, errs []error) error {
	for i, a := range answers {
		if errs[i] == nil && (a.status == http.StatusUnauthorized || a.status == http.StatusForbidden) {
			return e.statusError("GET "+detectPaths[i], a)
		}
	}
	var failed int
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed == len(errs) {
		return errs[0] // the same cause for all, as a rule; the first names the model list
	}
	var seen []string
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			seen = append(seen, errs[i].Error())
		case a.status != http.StatusOK:
			seen = append(seen, fmt.Sprintf("%s %d", detectPaths[i], a.status))
		default:
			seen = append(seen, fmt.Sprintf("%s 200 but not JSON (%s)", detectPaths[i], a.contentType))
		}
	}
	return fmt.Errorf("%w: %s", ErrUnknownServer, strings.Join(seen, ", "))
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
		// latscope's own simulator speaks vLLM's API and metrics, and says
		// when its headers leave.
		d.Server, d.Dialect = simServerKind(bodies["/v1/models"]), DialectOpenAIChat
	case has("/admin/config", "time-to-first-token", "inter-token-latency"):
		// llm-d-inference-sim says owned_by "vllm" but has no /version; its
		// settings hold the latencies it simulates, which no server has.
		d.Server, d.Dialect = ServerLlmdSim, DialectOpenAIChat
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

// simServerKind names the simulator's kind from the header timing its model
// list states; a timing it does not state or that is unknown is at once.
func simServerKind(b []byte) string {
	var list struct {
		Data []struct {
			Headers string `json:"latscope_headers"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &list) != nil || len(list.Data) == 0 {
		return ServerLatscopeSim
	}
	switch list.Data[0].Headers {
	case "slotted":
		return ServerLatscopeSimSlotted
	case "first-token":
		return ServerLatscopeSimFirstToken
	}
	return ServerLatscopeSim
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
