package probe_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
)

// These tests run a reasoning model's stream on a virtual clock: a server
// over an in-memory connection sends N reasoning deltas, then answer
// deltas, one every itl after a first-token delay. On the virtual clock the
// probe's times are exact, so the time to the first answer token must be
// TTFT + N × ITL (to the 1 ms the acceptance asks, in fact to the ns).

// pipeListener is an in-memory net.Listener: a dial hands Accept the other
// end of a net.Pipe, whose waits are durably blocking inside a bubble.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// pacedStream is a server's stream: its opening (sent at once), its
// tokens (the first after first, the others itl apart) and its end.
type pacedStream struct {
	contentType string
	open        string
	tokens      []string
	end         string
	first, itl  time.Duration
}

// serveOnPipe serves h on an in-memory listener and returns a client
// that dials it; the server stops when the test's bubble ends.
func serveOnPipe(t *testing.T, h http.Handler) *http.Client {
	t.Helper()
	ln := newPipeListener()
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	tr := &http.Transport{DialContext: ln.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-done
	})
	return &http.Client{Transport: tr}
}

func (s pacedStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", s.contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(s.open))
	w.(http.Flusher).Flush()
	for i, tok := range s.tokens {
		d := s.itl
		if i == 0 {
			d = s.first
		}
		time.Sleep(d) // the model's pace, on the virtual clock
		_, _ = w.Write([]byte(tok))
		w.(http.Flusher).Flush()
	}
	_, _ = w.Write([]byte(s.end))
}

// doOne sends one request in dialect to stream on a virtual clock.
func doOne(t *testing.T, dialect string, stream pacedStream) *event.Request {
	t.Helper()
	var rec *event.Request
	synctest.Test(t, func(t *testing.T) {
		hc := serveOnPipe(t, stream)
		c, err := probe.NewClient(probe.ClientConfig{BaseURL: "http://model.test", Dialect: dialect, Model: "m",
			HTTPClient: hc, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		rec = c.Do(context.Background(), probe.RequestSpec{ID: "r1", Prompt: "hello", OutputTokens: len(stream.tokens)})
	})
	return rec
}

const (
	reasoningFirst = 51 * time.Millisecond
	reasoningITL   = 10 * time.Millisecond
)

// chatStream is an OpenAI chat stream of n reasoning deltas in field, then
// m answer deltas, with usage.
func chatStream(field string, n, m int) pacedStream {
	s := pacedStream{contentType: "text/event-stream", first: reasoningFirst, itl: reasoningITL,
		open: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"}
	for i := range n {
		s.tokens = append(s.tokens, fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"%s":"think%d "}}]}`+"\n\n", field, i))
	}
	for i := range m {
		s.tokens = append(s.tokens, fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"content":"word%d "}}]}`+"\n\n", i))
	}
	s.end = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n" +
		fmt.Sprintf(`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}}`, n+m, n+m+3) + "\n\n" +
		"data: [DONE]\n\n"
	return s
}

// ollamaThinkingStream is Ollama's native /api/chat with "think": n
// message.thinking lines, then m content lines, then the done line.
func ollamaThinkingStream(n, m int) pacedStream {
	s := pacedStream{contentType: "application/x-ndjson", first: reasoningFirst, itl: reasoningITL}
	for i := range n {
		s.tokens = append(s.tokens, fmt.Sprintf(`{"model":"m","message":{"role":"assistant","content":"","thinking":"t%d "},"done":false}`+"\n", i))
	}
	for i := range m {
		s.tokens = append(s.tokens, fmt.Sprintf(`{"model":"m","message":{"role":"assistant","content":"w%d "},"done":false}`+"\n", i))
	}
	s.end = fmt.Sprintf(`{"model":"m","message":{"role":"assistant","content":""},"done":true,"total_duration":1000,"prompt_eval_count":3,"eval_count":%d}`, n+m) + "\n"
	return s
}

// responsesStream is a Responses API stream of n reasoning deltas of
// reasoningType, then m output text deltas, ending with
// response.completed and its usage.
func responsesStream(reasoningType string, n, m int) pacedStream {
	ev := func(typ, body string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + body + "}\n\n"
	}
	s := pacedStream{contentType: "text/event-stream", first: reasoningFirst, itl: reasoningITL,
		open: ev("response.created", `,"sequence_number":0,"response":{"id":"resp_1","status":"in_progress","error":null}`)}
	for i := range n {
		s.tokens = append(s.tokens, ev(reasoningType, fmt.Sprintf(`,"sequence_number":%d,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"t%d "`, i+1, i)))
	}
	for i := range m {
		s.tokens = append(s.tokens, ev("response.output_text.delta", fmt.Sprintf(`,"sequence_number":%d,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"w%d "`, n+i+1, i)))
	}
	s.end = ev("response.output_text.done", `,"text":"..."`) +
		ev("response.completed", fmt.Sprintf(`,"response":{"status":"completed","usage":{"input_tokens":3,"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}}`, n+m, n, n+m+3))
	return s
}

func TestReasoningAnswerStartsAfterTheThinking(t *testing.T) {
	const n, m = 20, 5
	cases := []struct {
		name, dialect string
		stream        pacedStream
	}{
		{"chat delta.reasoning", probe.DialectOpenAIChat, chatStream("reasoning", n, m)},
		{"chat delta.reasoning_content", probe.DialectOpenAIChat, chatStream("reasoning_content", n, m)},
		{"ollama message.thinking", probe.DialectOllamaChat, ollamaThinkingStream(n, m)},
		{"responses reasoning_text", probe.DialectOpenAIResponses, responsesStream("response.reasoning_text.delta", n, m)},
		{"responses reasoning_summary_text", probe.DialectOpenAIResponses, responsesStream("response.reasoning_summary_text.delta", n, m)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := doOne(t, tc.dialect, tc.stream)
			if !rec.OK() {
				t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
			}
			if rec.TTFT != reasoningFirst {
				t.Errorf("TTFT = %v, want the first reasoning delta at %v", rec.TTFT, reasoningFirst)
			}
			want := rec.TTFT + n*reasoningITL
			if d := rec.TTFTAnswer - want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("TTFTAnswer = %v, want TTFT + %d × ITL = %v within 1 ms", rec.TTFTAnswer, n, want)
			}
			if rec.Thinking() != n*reasoningITL {
				t.Errorf("thinking = %v, want %v", rec.Thinking(), n*reasoningITL)
			}
			if rec.ReasoningTokens != n || rec.OutputTokens != n+m || rec.AnswerTokens() != m {
				t.Errorf("tokens: reasoning %d, output %d, answer %d; want %d, %d, %d",
					rec.ReasoningTokens, rec.OutputTokens, rec.AnswerTokens(), n, n+m, m)
			}
			if got := rec.TTST(); got != rec.TTFT+reasoningITL {
				t.Errorf("TTST = %v, want TTFT + ITL = %v", got, rec.TTFT+reasoningITL)
			}
			if rec.AnswerTTFT() != rec.TTFTAnswer {
				t.Errorf("AnswerTTFT = %v, want TTFTAnswer %v", rec.AnswerTTFT(), rec.TTFTAnswer)
			}
		})
	}
}

// A model that does not reason: the answer began at the first token, and
// nothing about reasoning is recorded (old recordings stay as they were).
func TestNoReasoningLeavesTheAnswerAtTTFT(t *testing.T) {
	for _, tc := range []struct {
		dialect string
		stream  pacedStream
	}{
		{probe.DialectOpenAIChat, chatStream("reasoning", 0, 5)},
		{probe.DialectOpenAIResponses, responsesStream("", 0, 5)},
	} {
		rec := doOne(t, tc.dialect, tc.stream)
		if !rec.OK() {
			t.Fatalf("%s: outcome %s: %s", tc.dialect, rec.Outcome, rec.Error)
		}
		if rec.ReasoningTokens != 0 || rec.TTFTAnswer != 0 || rec.Thinking() != 0 {
			t.Errorf("%s: reasoning %d, ttft_answer %v, thinking %v; want none", tc.dialect, rec.ReasoningTokens, rec.TTFTAnswer, rec.Thinking())
		}
		if rec.AnswerTTFT() != rec.TTFT || rec.TTFT != reasoningFirst {
			t.Errorf("%s: AnswerTTFT %v, TTFT %v; want both %v", tc.dialect, rec.AnswerTTFT(), rec.TTFT, reasoningFirst)
		}
	}
}

// A reasoning model cut off by its token budget before it answered has no
// answer TTFT: zero, not its first reasoning delta.
func TestReasoningWithoutAnswer(t *testing.T) {
	rec := doOne(t, probe.DialectOpenAIChat, chatStream("reasoning", 4, 0))
	if !rec.OK() || rec.ReasoningTokens != 4 || rec.TTFTAnswer != 0 || rec.AnswerTTFT() != 0 || rec.Thinking() != 0 {
		t.Errorf("outcome %s, reasoning %d, ttft_answer %v, answer ttft %v, thinking %v; want ok, 4, 0, 0, 0",
			rec.Outcome, rec.ReasoningTokens, rec.TTFTAnswer, rec.AnswerTTFT(), rec.Thinking())
	}
}

// A Responses stream's error and failed events end the request as server
// errors, and one without its final event as a reset stream.
func TestResponsesStreamErrors(t *testing.T) {
	base := responsesStream("response.reasoning_text.delta", 1, 2)
	for _, tc := range []struct {
		name, end string
		want      event.Outcome
		msg       string
	}{
		{"error event", "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n", event.OutcomeServerError, "boom"},
		{"failed", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"x\",\"message\":\"went wrong\"}}}\n\n", event.OutcomeServerError, "went wrong"},
		{"vllm error object", "data: {\"error\":{\"message\":\"oops\"}}\n\n", event.OutcomeServerError, "oops"},
		{"cut short", "", event.OutcomeStreamReset, ""},
		{"no type", "data: {\"delta\":\"x\"}\n\n", event.OutcomeMalformed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			s.end = tc.end
			rec := doOne(t, probe.DialectOpenAIResponses, s)
			if rec.Outcome != tc.want || !strings.Contains(rec.Error, tc.msg) {
				t.Errorf("outcome %s (%s), want %s with %q", rec.Outcome, rec.Error, tc.want, tc.msg)
			}
		})
	}
}

// A server that reasons without streaming its reasoning (the Responses API
// without a summary) says so only in the usage: the count is kept, and the
// answer began at the first token, its thinking hidden in the TTFT.
func TestHiddenReasoningCountedFromUsage(t *testing.T) {
	s := responsesStream("", 0, 5)
	s.end = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"," +
		"\"usage\":{\"input_tokens\":3,\"output_tokens\":505,\"output_tokens_details\":{\"reasoning_tokens\":500}}}}\n\n"
	rec := doOne(t, probe.DialectOpenAIResponses, s)
	if !rec.OK() || rec.ReasoningTokens != 500 || rec.OutputTokens != 505 || rec.TTFTAnswer != rec.TTFT || rec.Thinking() != 0 || rec.AnswerTokens() != 5 {
		t.Errorf("outcome %s, reasoning %d of %d, ttft %v, answer %v, thinking %v",
			rec.Outcome, rec.ReasoningTokens, rec.OutputTokens, rec.TTFT, rec.TTFTAnswer, rec.Thinking())
	}
}
