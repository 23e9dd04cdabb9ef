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
	Server  string   // vllm, sglang, tgi, llamacpp, ollama, latscope-sim (or -slotted, -first-token), llm-d-sim, openai (an unrecognised OpenAI-compatible server) or anthropic (a server that speaks only the Messages API)
	Dialect string   // the default dialect for that server
	Models  []string // models the server lists; the first is the default --model
}

// Server kinds Detect reports for servers it knows only by their API.
const (
	// ServerOpenAI is an OpenAI-compatible server latscope does not
	// recognise otherwise (OpenAI itself, a gateway).
	ServerOpenAI = "openai"
	// ServerAnthropic is a server that speaks the Anthropic Messages API
	// and not OpenAI's: Anthropic itself, or a gateway in front of it. A
	// server that speaks both (vLLM, llama.cpp, Ollama) is detected as
	// itself, with its OpenAI or native dialect.
	ServerAnthropic = "anthropic"
)

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
// /admin/config (its own settings: a latency to simulate); the Anthropic
// Messages API by its model list's shape. When none of these tells the
// server, or only an OpenAI-shaped model list answered, Detect posts an
// empty request to /v1/messages and /v1/chat/completions: a server with
// the first route and not the second speaks only the Messages API. The
// calls of each round run in parallel, each bounded by ep's timeout, so
// Detect takes about twice that at most. Every call carries the Messages
// API's headers too (see withAnthropicHeaders). When no server is
// recognised the error says why: the network
// cause, a refused key (wrapping ErrUnauthorized), silence (wrapping
// ErrNoAnswer), or what each endpoint answered (wrapping ErrUnknownServer). The errors name the
// endpoints, not the base URL, which the caller knows.
func Detect(ctx context.Context, ep Endpoint) (Detected, error) {
	e, err := ep.check()
	if err != nil {
		return Detected{}, err
	}
	e = e.withAnthropicHeaders()
	calls := e.callAll(ctx, http.MethodGet, detectPaths, nil)
	if ctx.Err() != nil {
		return Detected{}, context.Cause(ctx)
	}
	bodies := make(map[string][]byte, len(detectPaths))
	for _, c := range calls {
		if c.err == nil && c.a.status == http.StatusOK && json.Valid(c.a.body) {
			bodies[c.path] = c.a.body
		}
	}
	d, ok := classifyServer(bodies)
	if ok && d.Server != ServerOpenAI {
		return d, nil
	}
	if !ok && allFailed(calls) {
		return Detected{}, e.detectFailure(calls)
	}
	// Nothing known answered, or only an OpenAI-shaped model list: a server
	// that speaks the Messages API and not OpenAI's is told by its routes.
	probes := e.callAll(ctx, http.MethodPost, messagesProbePaths, []byte("{}"))
	if ctx.Err() != nil {
		return Detected{}, context.Cause(ctx)
	}
	if answered(probes[0]) && refused(probes[1]) {
		if st := probes[0].a.status; st == http.StatusUnauthorized || st == http.StatusForbidden {
			return Detected{}, e.statusError(probes[0].name(), probes[0].a)
		}
		d.Server, d.Dialect = ServerAnthropic, DialectAnthropicMessages
		return d, nil
	}
	if ok {
		return d, nil
	}
	return Detected{}, e.detectFailure(append(calls, probes...))
}

// messagesProbePaths are the routes asked, with an empty request ({}), when
// the model lists did not tell the server: the Messages API's and OpenAI's
// chat. An empty request is refused as invalid by a route that exists
// (nothing is generated) and as not found by one that does not.
var messagesProbePaths = []string{"/v1/messages", "/v1/chat/completions"}

// detectCall is one call Detect made.
type detectCall struct {
	method, path string
	a            answer
	err          error
}

// name is the call as messages show it: a GET by its path alone.
func (c detectCall) name() string {
	if c.method == http.MethodGet {
		return c.path
	}
	return c.method + " " + c.path
}

// callAll sends method to every path in parallel, each bounded by the
// endpoint's timeout.
func (e *endpoint) callAll(ctx context.Context, method string, paths []string, body []byte) []detectCall {
	calls := make([]detectCall, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		calls[i] = detectCall{method: method, path: p}
		wg.Go(func() { calls[i].a, calls[i].err = e.call(ctx, method, p, body, detectBodyLimit) })
	}
	wg.Wait()
	return calls
}

// withAnthropicHeaders returns e with the headers the Messages API wants
// on every call (Anthropic answers even its model list only with them): the
// bearer key again as x-api-key, and anthropic-version. A header already
// given stays as it is; other servers ignore both.
func (e *endpoint) withAnthropicHeaders() *endpoint {
	h := e.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if key, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok && key != "" && h.Get(headerAnthropicKey) == "" {
		h.Set(headerAnthropicKey, key)
	}
	if h.Get(headerAnthropicVersion) == "" {
		h.Set(headerAnthropicVersion, anthropicVersion)
	}
	out := *e
	out.header = h
	return &out
}

// answered reports whether a route exists: a JSON answer, not a 404, 405
// or 501 (a refusal of the empty request, even of its credentials, is an
// answer).
func answered(c detectCall) bool {
	return c.err == nil && !routeMissing(c.a.status) && json.Valid(c.a.body)
}

// refused reports whether the server said it has no such route.
func refused(c detectCall) bool { return c.err == nil && routeMissing(c.a.status) }

func routeMissing(status int) bool {
	return status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented
}

func allFailed(calls []detectCall) bool {
	for _, c := range calls {
		if c.err == nil {
			return false
		}
	}
	return true
}

// detectFailure says why no endpoint identified a server: a refused key
// first, then a network failure that every call shared, then what each
// endpoint answered.
func (e *endpoint) detectFailure(calls []detectCall) error {
	for _, c := range calls {
		if c.err == nil && (c.a.status == http.StatusUnauthorized || c.a.status == http.StatusForbidden) {
			return e.statusError(c.method+" "+c.path, c.a)
		}
	}
	if allFailed(calls) {
		return calls[0].err // the same cause for all, as a rule; the first names the model list
	}
	var seen []string
	for _, c := range calls {
		switch {
		case c.err != nil:
			seen = append(seen, c.err.Error())
		case c.a.status != http.StatusOK:
			seen = append(seen, fmt.Sprintf("%s %d", c.name(), c.a.status))
		default:
			seen = append(seen, fmt.Sprintf("%s 200 but not JSON (%s)", c.name(), c.a.contentType))
		}
	}
	return fmt.Errorf("%w: %s", ErrUnknownServer, strings.Join(seen, ", "))
}

// classifyServer decides from the endpoint bodies, most specific first.
func classifyServer(bodies map[string][]byte) (Detected, bool) {
	b := serverBodies(bodies)
	models, owners := openAIModels(b["/v1/models"])
	server, dialect, ok := b.identify(owners)
	if !ok {
		return Detected{}, false
	}
	if len(models) == 0 {
		models = b.ownModels(server)
	}
	return Detected{Server: server, Dialect: dialect, Models: models}, true
}

// serverBodies are the bodies of the endpoints Detect asked, by path.
type serverBodies map[string][]byte

// has reports whether the body at path is a JSON object with every key.
func (b serverBodies) has(path string, keys ...string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b[path], &m) != nil {
		return false
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// str is the string at key in the JSON object at path ("" if none).
func (b serverBodies) str(path, key string) string {
	var m map[string]any
	_ = json.Unmarshal(b[path], &m)
	s, _ := m[key].(string)
	return s
}

// identify names the server and its dialect from the endpoints only it
// has; owners are the owned_by values of its /v1/models list.
func (b serverBodies) identify(owners map[string]bool) (server, dialect string, ok bool) {
	switch {
	case b.has("/api/version", "version") || b.has("/api/tags", "models"):
		return "ollama", DialectOllamaGenerate, true
	case b.has("/info", "model_id", "router"):
		return "tgi", DialectTGI, true
	case b.has("/props", "default_generation_settings") || b.has("/props", "total_slots") || isJSONArray(b["/slots"]):
		return "llamacpp", DialectLlamaCpp, true
	case b.has("/get_model_info", "model_path") || b.has("/get_server_info"):
		return "sglang", DialectOpenAIChat, true
	case owners["latscope-sim"]:
		// latscope's own simulator speaks vLLM's API and metrics, and says
		// when its headers leave.
		return simServerKind(b["/v1/models"]), DialectOpenAIChat, true
	case b.has("/admin/config", "time-to-first-token", "inter-token-latency"):
		// llm-d-inference-sim says owned_by "vllm" but has no /version; its
		// settings hold the latencies it simulates, which no server has.
		return ServerLlmdSim, DialectOpenAIChat, true
	case owners["vllm"] || (b.has("/version", "version") && b["/v1/models"] != nil):
		return "vllm", DialectOpenAIChat, true
	case b["/v1/models"] != nil:
		server, dialect = modelListServer(b["/v1/models"])
		return server, dialect, true
	}
	return "", "", false
}

// ownModels reads the model a server names on its own endpoints, for one
// whose /v1/models list named none.
func (b serverBodies) ownModels(server string) []string {
	switch server {
	case "ollama":
		return ollamaTags(b["/api/tags"])
	case "tgi":
		return nonEmpty(b.str("/info", "model_id"))
	case "llamacpp":
		if p := b.str("/props", "model_path"); p != "" {
			return []string{path.Base(p)}
		}
	case "sglang":
		return nonEmpty(b.str("/get_model_info", "model_path"))
	}
	return nil
}

// modelListServer names a server known only by its model list: one in the
// Messages API's shape is Anthropic's, any other OpenAI-compatible.
func modelListServer(b []byte) (server, dialect string) {
	if anthropicModels(b) {
		return ServerAnthropic, DialectAnthropicMessages
	}
	return ServerOpenAI, DialectOpenAIChat
}

// anthropicModels reports whether a /v1/models list is in the Messages
// API's shape, {"data":[{"type":"model","id":...,"display_name":...}],
// "has_more":false}, not OpenAI's ({"object":"list","data":[{"object":
// "model","owned_by":...}]}).
func anthropicModels(b []byte) bool {
	var list struct {
		Object  *string          `json:"object"`
		HasMore *bool            `json:"has_more"`
		Data    []map[string]any `json:"data"`
	}
	if json.Unmarshal(b, &list) != nil || list.Object != nil {
		return false
	}
	if len(list.Data) == 0 {
		return list.HasMore != nil
	}
	_, openAI := list.Data[0]["object"]
	return list.Data[0]["type"] == "model" && !openAI
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
