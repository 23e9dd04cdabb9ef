package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxFastBody bounds the request body the fast server reads.
const maxFastBody = 1 << 20

// FastServer is an OpenAI-compatible chat completions endpoint that streams
// as fast as the socket takes it: no model, no sleeps. Each token is one SSE
// event shaped like vLLM's chat chunk; TokensPerWrite events go out per write
// and flush. It is the throughput bench's server: the client, not the server,
// should be the bottleneck.
type FastServer struct {
	// TokensPerWrite is how many token events go into one write (1 or more).
	TokensPerWrite int
	// Model is echoed in every chunk when the request names none.
	Model string
	// Endless, when positive, makes every stream ignore the request's
	// max_tokens and cut off after Endless tokens with no finish, usage or
	// [DONE]: a server that streams without end, behind a proxy that
	// closes it (the soak bench's endless case).
	Endless int
	// Sent, when set, counts the token events written.
	Sent *atomic.Int64

	// FirstToken and Interval, when Interval is positive, pace the stream
	// on a fixed schedule instead: content write i is due FirstToken +
	// i×Interval after the request arrived (the scale bench's server, whose
	// load is then known in advance). A late write is not made up for by
	// later ones being early; each keeps its own due time.
	FirstToken, Interval time.Duration
	// OnStream, when set, is given each finished stream's request id, when
	// the request arrived and when each content write was flushed, before
	// the stream's tail (finish, usage, [DONE]) goes out: a client that has
	// read the whole stream is sure to find its truth recorded.
	OnStream func(id string, arrived time.Time, flushed []time.Time)
}

// maxPace bounds the pacing delays a FastServer accepts.
const maxPace = time.Hour

// Validate reports the first setting the server cannot serve with.
func (s FastServer) Validate() error {
	switch {
	case s.TokensPerWrite < 1 || s.TokensPerWrite > 4096:
		return fmt.Errorf("tokens per write must be between 1 and 4096, got %d", s.TokensPerWrite)
	case s.FirstToken < 0 || s.FirstToken > maxPace:
		return fmt.Errorf("first token delay must be between 0 and %s, got %s", maxPace, s.FirstToken)
	case s.Interval < 0 || s.Interval > maxPace:
		return fmt.Errorf("token interval must be between 0 and %s, got %s", maxPace, s.Interval)
	}
	return nil
}

// fastVocab is cycled through as the streamed text; each entry is one token.
var fastVocab = [...]string{" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy",
	" dog", ",", " and", " then", " it", " runs", " away", "."}

type fastRequest struct {
	Model               string `json:"model"`
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	Stream              bool   `json:"stream"`
}

// ServeHTTP implements http.Handler.
func (s FastServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions":
		s.serveChat(w, r)
	case "/v1/models", "/models":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"latscope-bench"}]}`, s.model(""))
	default:
		http.NotFound(w, r)
	}
}

// serveChat streams one chat completion: a role chunk, the content
// writes, then (unless Endless) the finish, usage and [DONE].
func (s FastServer) serveChat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var req fastRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxFastBody)).Decode(&req); err != nil {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	n := s.outputTokens(req)
	arrived := time.Now()
	id := r.Header.Get("X-Request-Id")
	if id == "" {
		id = "fast"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	st := newFastStream(w, `data: {"id":"chatcmpl-`+jsonSafe(id)+`","object":"chat.completion.chunk","created":`+
		strconv.FormatInt(time.Now().Unix(), 10)+`,"model":"`+jsonSafe(s.model(req.Model))+`","choices":[`)
	if !st.write([]byte(st.head + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")) {
		return
	}
	flushed, ok := s.sendTokens(r.Context(), st, arrived, n)
	if !ok {
		return
	}
	if s.OnStream != nil {
		s.OnStream(id, arrived, flushed)
	}
	if s.Endless > 0 {
		return // cut: no finish, no usage, no [DONE]
	}
	tail := st.head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}` + "\n\n" +
		st.head + `],"usage":{"prompt_tokens":1,"completion_tokens":` + strconv.Itoa(n) + `,"total_tokens":` + strconv.Itoa(n+1) + "}}\n\n" +
		"data: [DONE]\n\n"
	st.write([]byte(tail))
}

// outputTokens is how many tokens to stream for req: what it asks for (16
// when it asks none), or Endless.
func (s FastServer) outputTokens(req fastRequest) int {
	n := req.MaxTokens
	if req.MaxCompletionTokens > 0 {
		n = req.MaxCompletionTokens
	}
	if n <= 0 {
		n = 16
	}
	if s.Endless > 0 {
		n = s.Endless
	}
	return n
}

// sendTokens writes n content tokens, TokensPerWrite to a write, on the
// pacing schedule when there is one. flushed holds when each write went
// out, when OnStream wants it; ok is false when the client went away.
func (s FastServer) sendTokens(ctx context.Context, st *fastStream, arrived time.Time, n int) (flushed []time.Time, ok bool) {
	per := max(s.TokensPerWrite, 1)
	if s.OnStream != nil {
		flushed = make([]time.Time, 0, (n+per-1)/per)
	}
	for i, sent := 0, 0; sent < n; i++ {
		if s.Interval > 0 && !sleepUntil(ctx, arrived.Add(s.FirstToken+time.Duration(i)*s.Interval)) {
			return flushed, false
		}
		k := min(per, n-sent)
		if !st.write(vocabEvents(st.block, st.ends, sent, k)) {
			return flushed, false
		}
		if s.OnStream != nil {
			flushed = append(flushed, time.Now())
		}
		sent += k
		if s.Sent != nil {
			s.Sent.Add(int64(k))
		}
	}
	return flushed, true
}

// fastStream writes one response's events, flushing after each write.
type fastStream struct {
	w       http.ResponseWriter
	flusher http.Flusher // nil when w cannot flush
	head    string       // every chunk up to its choices
	// block holds every vocabulary token once, as ready-made events, so a
	// write is a slice of it and costs the server nothing per token; ends
	// are where each token's event ends in it.
	block []byte
	ends  []int
}

func newFastStream(w http.ResponseWriter, head string) *fastStream {
	st := &fastStream{w: w, head: head, ends: make([]int, 0, len(fastVocab))}
	st.flusher, _ = w.(http.Flusher)
	for _, tok := range fastVocab {
		st.block = append(st.block, head...)
		st.block = append(st.block, `{"index":0,"delta":{"content":"`...)
		st.block = append(st.block, tok...)
		st.block = append(st.block, `"},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		st.ends = append(st.ends, len(st.block))
	}
	return st
}

// write sends b and flushes it; false when the client went away.
func (st *fastStream) write(b []byte) bool {
	if _, err := st.w.Write(b); err != nil {
		return false
	}
	if st.flusher != nil {
		st.flusher.Flush()
	}
	return true
}

// sleepUntil waits until due, or returns false when ctx (the request's:
// the client went away) ends first.
func sleepUntil(ctx context.Context, due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// vocabEvents returns k consecutive token events starting at token index
// from. Runs that wrap around the block are returned as a fresh copy.
func vocabEvents(block []byte, ends []int, from, k int) []byte {
	i := from % len(ends)
	begin := 0
	if i > 0 {
		begin = ends[i-1]
	}
	if i+k <= len(ends) {
		return block[begin:ends[i+k-1]]
	}
	out := append([]byte(nil), block[begin:]...)
	for k -= len(ends) - i; k > 0; k -= min(k, len(ends)) {
		out = append(out, block[:ends[min(k, len(ends))-1]]...)
	}
	return out
}

func (s FastServer) model(asked string) string {
	if asked != "" {
		return asked
	}
	if s.Model != "" {
		return s.Model
	}
	return "bench-model"
}

// jsonSafe strips the characters that would need escaping inside a JSON
// string, which ids and model names never legitimately contain.
func jsonSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 {
			return -1
		}
		return r
	}, s)
}
