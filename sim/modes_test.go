package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of the modes that make the simulator behave like servers other than
// vLLM, each as a client sees it over loopback.

func TestCloseAfterStream(t *testing.T) {
	t.Parallel()
	for _, closeAfter := range []bool{false, true} {
		t.Run(map[bool]string{false: "keep-alive", true: "close-after-stream"}[closeAfter], func(t *testing.T) {
			t.Parallel()
			_, url := startServer(t, Config{Profile: tinyProfile(t), CloseAfterStream: closeAfter})
			transport := &http.Transport{}
			t.Cleanup(transport.CloseIdleConnections)
			client := &http.Client{Transport: transport}
			ctx := testCtx(t, 10*time.Second)
			// reuses sends a request and reports whether it went out on a
			// pooled connection.
			reuses := func(body map[string]any) (streamResult, bool) {
				var reused bool
				trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
				return postWith(httptrace.WithClientTrace(ctx, trace), client, url, "/v1/chat/completions", body, nil), reused
			}

			// A non-streamed response leaves the connection usable.
			if res, _ := reuses(chatBody("hi", 3, false)); res.status != http.StatusOK {
				t.Fatalf("first request: %d %v", res.status, res.err)
			}
			if res, reused := reuses(chatBody("hi", 3, true)); !res.done || !reused {
				t.Fatalf("stream after a non-streamed response: done %v, reused %v, err %v", res.done, reused, res.err)
			} else if c := res.header.Get("Connection"); c != "" {
				t.Fatalf("stream said Connection: %s", c)
			}
			// The stream left its connection in the pool; the next POST takes it.
			res, reused := reuses(chatBody("hi", 3, true))
			if !reused {
				t.Fatal("the next request did not get the pooled connection")
			}
			if !closeAfter {
				if !res.done {
					t.Fatalf("keep-alive: the next request failed: %v", res.err)
				}
				return
			}
			if res.err == nil || res.status != 0 {
				t.Fatalf("next POST on the pooled connection: status %d, err %v; want a transport error before any response", res.status, res.err)
			}
			if !errors.Is(res.err, io.EOF) && !strings.Contains(res.err.Error(), "server closed idle connection") {
				t.Errorf("error = %v, want EOF or server closed idle connection", res.err)
			}
			// A new connection serves the retry.
			if res, reused := reuses(chatBody("hi", 3, true)); !res.done || reused {
				t.Errorf("retry: done %v, reused %v, err %v", res.done, reused, res.err)
			}
		})
	}
}

func TestHeaderTiming(t *testing.T) {
	t.Parallel()
	for _, timing := range HeaderTimings() {
		t.Run(string(timing), func(t *testing.T) {
			t.Parallel()
			var (
				mu        sync.Mutex
				aFinished time.Time
				aStarted  = make(chan struct{})
				startOnce sync.Once
			)
			s, url := startServer(t, Config{Profile: tinyProfile(t), MaxNumSeqs: 1, Headers: timing,
				OnFrame: func(f FrameInfo) {
					if f.RequestID == "a" {
						startOnce.Do(func() { close(aStarted) })
					}
				},
				OnFinish: func(tr Truth) {
					if tr.RequestID == "a" {
						mu.Lock()
						aFinished = time.Now()
						mu.Unlock()
					}
				},
			})
			ctx := testCtx(t, 10*time.Second)
			// a holds the only slot until the test cancels it.
			aCtx, cancelA := context.WithCancel(ctx)
			aDone := make(chan streamResult, 1)
			go func() {
				aDone <- post(aCtx, url, "/v1/chat/completions", chatBody("a", 20000, true), map[string]string{RequestIDHeader: "a"})
			}()
			waitClosed(t, ctx, aStarted, "a's first frame")

			bHeaders := make(chan struct{})
			trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { close(bHeaders) }}
			bDone := make(chan streamResult, 1)
			go func() {
				bDone <- post(httptrace.WithClientTrace(ctx, trace), url, "/v1/chat/completions", chatBody("b", 3, true),
					map[string]string{RequestIDHeader: "b", TruthHeader: "1"})
			}()
			if timing == HeadersAtOnce {
				waitClosed(t, ctx, bHeaders, "b's headers while a holds the slot")
			} else {
				waitFor(t, func() bool { return s.Stats().Waiting == 1 })
				select {
				case <-bHeaders:
					t.Fatal("b's headers arrived while b waited for a slot")
				default:
				}
			}
			cancelA()
			<-aDone
			b := <-bDone
			if !b.done {
				t.Fatalf("b: %d %v", b.status, b.err)
			}
			mu.Lock()
			finished := aFinished
			mu.Unlock()
			if got := b.headersAt.After(finished); got != (timing != HeadersAtOnce) {
				t.Errorf("b's headers at %v, a finished at %v: after = %v", b.headersAt, finished, got)
			}
			tr := lastTruth(t, b)
			toFirstToken := tr.ArrivalToFirstFrameUs - tr.FramingUs - tr.DetokenizeUs
			switch timing {
			case HeadersAtOnce:
				if tr.HeadersUs <= 0 || tr.HeadersUs > toFirstToken {
					t.Errorf("headers_us = %d, want before the first token (%d)", tr.HeadersUs, toFirstToken)
				}
			case HeadersSlotted:
				// The loop sends them before it picks up the first token,
				// within the same microsecond when it was busy meanwhile.
				if tr.HeadersUs < tr.QueueUs || tr.HeadersUs > toFirstToken {
					t.Errorf("headers_us = %d, want after the queue (%d) and before the first token (%d)", tr.HeadersUs, tr.QueueUs, toFirstToken)
				}
			case HeadersFirstToken:
				if tr.HeadersUs < toFirstToken || tr.HeadersUs > tr.ArrivalToFirstFrameUs {
					t.Errorf("headers_us = %d, want with the first frame (%d-%d)", tr.HeadersUs, toFirstToken, tr.ArrivalToFirstFrameUs)
				}
			}
		})
	}
}

// waitClosed waits for ch to close, failing the test if ctx ends first.
func waitClosed(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestPrefixCache(t *testing.T) {
	t.Parallel()
	const blocks = 64
	_, url := startServer(t, Config{Profile: tinyProfile(t), PrefixCacheBlocks: blocks})
	ctx := testCtx(t, 10*time.Second)
	prompt := promptOf(200)
	// Same first 100 words (103 tokens with the template's 3): 6 whole blocks.
	half := strings.Repeat("word ", 100) + strings.TrimSpace(strings.Repeat("other ", 94))
	for _, tc := range []struct {
		name, prompt string
		cached       int
	}{
		{"first", prompt, 0},
		{"same prompt", prompt, 192}, // (200-1)/16 whole blocks: the last token is always computed
		{"shared prefix", half, 96},
	} {
		res := post(ctx, url, "/v1/chat/completions", chatBody(tc.prompt, 2, true), map[string]string{TruthHeader: "1"})
		if !res.done {
			t.Fatalf("%s: %d %v", tc.name, res.status, res.err)
		}
		u := parseChunk(t, res.events[len(res.events)-1].data).Usage
		if u == nil || u.PromptTokens != 200 || u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != tc.cached {
			t.Errorf("%s: usage %s, want %d cached tokens", tc.name, res.events[len(res.events)-1].data, tc.cached)
		}
		tr := lastTruth(t, res)
		prefilled := 0
		for _, st := range tr.PrefillSteps {
			prefilled += st.Tokens
		}
		if tr.CachedTokens != tc.cached || prefilled != 200-tc.cached {
			t.Errorf("%s: truth cached %d, prefilled %d; want %d and %d", tc.name, tr.CachedTokens, prefilled, tc.cached, 200-tc.cached)
		}
	}
	fams := scrape(t, url)
	hits := fams["vllm:prefix_cache_hits_total"].GetMetric()[0].GetCounter().GetValue()
	queries := fams["vllm:prefix_cache_queries_total"].GetMetric()[0].GetCounter().GetValue()
	if hits != 192+96 || queries != 600 {
		t.Errorf("prefix cache hits %v of %v queried tokens, want 288 of 600", hits, queries)
	}

	// Off by default: nothing cached, nothing reported.
	_, off := startServer(t, Config{Profile: tinyProfile(t)})
	for range 2 {
		res := post(ctx, off, "/v1/chat/completions", chatBody(prompt, 2, true), map[string]string{TruthHeader: "1"})
		last := res.events[len(res.events)-1].data
		if u := parseChunk(t, last).Usage; u == nil || u.PromptTokensDetails != nil || lastTruth(t, res).CachedTokens != 0 {
			t.Errorf("cache off: %s", last)
		}
	}
}

func TestPrefixCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	ids := func(from, n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = from + i
		}
		return out
	}
	a, b := blockHashes(ids(1000, 3*PrefixBlockTokens+5)), blockHashes(ids(5000, 2*PrefixBlockTokens))
	if len(a) != 3 || len(b) != 2 {
		t.Fatalf("%d and %d blocks, want 3 and 2 (partial blocks are not cached)", len(a), len(b))
	}
	c := newPrefixCache(3)
	c.insert(a)
	if got := c.lookup(a); got != 3 {
		t.Fatalf("lookup after insert = %d blocks, want 3", got)
	}
	c.insert(b) // evicts a's two oldest blocks, breaking its prefix
	if got := c.lookup(a); got != 0 {
		t.Errorf("a's prefix: %d blocks, want 0 after eviction", got)
	}
	if got := c.lookup(b); got != 2 {
		t.Errorf("b's prefix: %d blocks, want 2", got)
	}
	if got := cachedTokens(4, 4*PrefixBlockTokens); got != 3*PrefixBlockTokens {
		t.Errorf("fully cached 4-block prompt skips %d tokens, want 3 blocks", got)
	}
}

func TestFaultErrorAfter(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	ctx := testCtx(t, 10*time.Second)
	for _, tc := range []struct {
		spec    string
		content int
	}{
		{"error-after=3", 3},
		{"error-after=0", 0},
		{"error-after=50", 8}, // past the end: the error replaces the finish
	} {
		res := post(ctx, url, "/v1/chat/completions", chatBody("hi", 8, true), faultHdr(tc.spec))
		if res.status != http.StatusOK || !res.done {
			t.Fatalf("%s: status %d, done %v, err %v; want a 200 stream ending in [DONE]", tc.spec, res.status, res.done, res.err)
		}
		if got := len(contentEvents(t, res)); got != tc.content {
			t.Errorf("%s: %d content frames, want %d", tc.spec, got, tc.content)
		}
		var ev struct {
			Error *struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Param   any    `json:"param"`
				Code    int    `json:"code"`
			} `json:"error"`
			Truth *Truth `json:"latscope_truth"`
		}
		last := res.events[len(res.events)-1].data
		if err := json.Unmarshal(last, &ev); err != nil || ev.Error == nil {
			t.Fatalf("%s: last event %s is not an error event: %v", tc.spec, last, err)
		}
		if ev.Error.Code != 500 || ev.Error.Type != "InternalServerError" || ev.Error.Message == "" || ev.Error.Param != nil {
			t.Errorf("%s: error %+v", tc.spec, ev.Error)
		}
		if ev.Truth == nil || ev.Truth.FinishReason != "error" || ev.Truth.OutputTokens != tc.content {
			t.Errorf("%s: truth %+v", tc.spec, ev.Truth)
		}
	}
	res := post(ctx, url, "/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 8}, faultHdr("error-after=2"))
	if res.status != http.StatusInternalServerError || !strings.Contains(string(res.body), `"InternalServerError"`) {
		t.Errorf("non-streaming: %d %s, want a 500 error", res.status, res.body)
	}
}

func TestKeepAbandoned(t *testing.T) {
	t.Parallel()
	// ~0.4 s of decoding: the client is gone long before the end.
	const maxTokens = 300
	var (
		mu      sync.Mutex
		order   []string // OnFinish and b's first frame, in order
		started = make(chan struct{})
		once    sync.Once
		aTruth  = make(chan Truth, 1)
	)
	_, url := startServer(t, Config{Profile: tinyProfile(t), MaxNumSeqs: 1, KeepAbandoned: true,
		OnFrame: func(f FrameInfo) {
			mu.Lock()
			defer mu.Unlock()
			if f.RequestID == "a" {
				once.Do(func() { close(started) })
			}
			if f.RequestID == "b" && f.Index == 0 {
				order = append(order, "b first frame")
			}
		},
		OnFinish: func(tr Truth) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, tr.RequestID+" finished")
			if tr.RequestID == "a" {
				aTruth <- tr
			}
		},
	})
	ctx := testCtx(t, 10*time.Second)
	aCtx, cancelA := context.WithCancel(ctx)
	aDone := make(chan streamResult, 1)
	go func() {
		aDone <- post(aCtx, url, "/v1/chat/completions", chatBody("a", maxTokens, true), map[string]string{RequestIDHeader: "a"})
	}()
	waitClosed(t, ctx, started, "a's first frame")
	cancelA()
	if res := <-aDone; res.done {
		t.Fatal("a finished before its client went away; the test needs it cut short")
	}
	// b queues behind a, which keeps the only slot until it is done.
	b := post(ctx, url, "/v1/chat/completions", chatBody("b", 2, true), map[string]string{RequestIDHeader: "b"})
	if !b.done {
		t.Fatalf("b: %d %v", b.status, b.err)
	}
	tr := <-aTruth
	if !tr.ClientGone || tr.OutputTokens != maxTokens || tr.FinishReason != "length" {
		t.Errorf("a's truth: client gone %v, %d tokens, finish %q; want the whole %d after its client left", tr.ClientGone, tr.OutputTokens, tr.FinishReason, maxTokens)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) < 2 || order[0] != "a finished" || order[1] != "b first frame" {
		t.Errorf("events = %v, want a to finish before b's first frame", order)
	}
}

// prefillProfile is tiny with a prefill slow enough that a long prompt's
// prefill is a distinct pause.
func prefillProfile(t *testing.T) Profile {
	p := tinyProfile(t)
	p.PrefillPerToken = 20 * time.Microsecond // 4000 tokens: 80 ms
	p.MaxBatchedTokens = 512
	return p
}

func TestNoChunkedPrefill(t *testing.T) {
	t.Parallel()
	const promptTokens = 4000
	for _, whole := range []bool{false, true} {
		t.Run(map[bool]string{false: "chunked", true: "whole"}[whole], func(t *testing.T) {
			t.Parallel()
			var (
				mu      sync.Mutex
				frames  []FrameInfo // the background stream's
				started = make(chan struct{})
				once    sync.Once
			)
			_, url := startServer(t, Config{Profile: prefillProfile(t), NoChunkedPrefill: whole,
				OnFrame: func(f FrameInfo) {
					if f.RequestID != "bg" {
						return
					}
					mu.Lock()
					frames = append(frames, f)
					if len(frames) == 3 {
						once.Do(func() { close(started) })
					}
					mu.Unlock()
				}})
			ctx := testCtx(t, 10*time.Second)
			bgCtx, stopBG := context.WithCancel(ctx)
			bgDone := make(chan streamResult, 1)
			go func() {
				bgDone <- post(bgCtx, url, "/v1/chat/completions", chatBody("bg", 20000, true), map[string]string{RequestIDHeader: "bg"})
			}()
			waitClosed(t, ctx, started, "the background stream")
			long := post(ctx, url, "/v1/chat/completions", chatBody(promptOf(promptTokens), 2, true), map[string]string{TruthHeader: "1"})
			stopBG()
			bg := <-bgDone
			if !long.done {
				t.Fatalf("long prompt: %d %v", long.status, long.err)
			}
			steps := lastTruth(t, long).PrefillSteps
			mu.Lock()
			defer mu.Unlock()
			first, last := steps[0], steps[len(steps)-1]
			during := 0 // background tokens made while the prompt was prefilled
			for _, f := range frames {
				if at := f.TokenAt.UnixMicro(); at > first.StartUnixUs && at < last.EndUnixUs {
					during++
				}
			}
			if !whole {
				sum := 0
				for _, st := range steps {
					sum += st.Tokens
					if st.DecodeSeqs < 1 || st.Tokens > 512 {
						t.Errorf("chunk %+v: want at most 512 tokens alongside the decoding stream", st)
					}
				}
				if len(steps) < promptTokens/512 || sum != promptTokens || during == 0 {
					t.Errorf("%d chunks of %d tokens, %d background tokens during the prefill; want the stream to decode between chunks", len(steps), sum, during)
				}
				return
			}
			if len(steps) != 1 || first.Tokens != promptTokens || first.DecodeSeqs != 0 {
				t.Fatalf("prefill steps %+v, want one of %d tokens with no decodes", steps, promptTokens)
			}
			if during != 0 {
				t.Errorf("%d background tokens made during the whole-prompt prefill, want 0", during)
			}
			// As the client saw it: the frame made after the prefill step
			// arrived after the step, the one before it was made before.
			content := contentEvents(t, bg)
			for i := 1; i < len(frames) && i < len(content); i++ {
				if frames[i-1].TokenAt.UnixMicro() <= first.StartUnixUs && frames[i].TokenAt.UnixMicro() >= first.EndUnixUs {
					gap := content[i].at.Sub(content[i-1].at)
					if content[i].at.UnixMicro() < first.EndUnixUs {
						t.Errorf("frame %d reached the client before the prefill step ended", i)
					}
					t.Logf("prefill step %v; the client saw a %v gap", time.Duration(first.EndUnixUs-first.StartUnixUs)*time.Microsecond, gap)
					return
				}
			}
			t.Errorf("no background frame pair straddles the prefill step %+v", first)
		})
	}
}

func TestLoading(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t), Loading: time.Hour})
	ctx := testCtx(t, 10*time.Second)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/health", "/v1/models", "/tokenize"} {
		method := http.MethodPost
		if path == "/health" || path == "/v1/models" {
			method = http.MethodGet
		}
		req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(`{"prompt":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"Loading model"`) {
			t.Errorf("%s while loading: %d %s", path, resp.StatusCode, body)
		}
	}
	if fams := scrape(t, url); fams["vllm:num_requests_running"] == nil {
		t.Error("/metrics does not answer while loading")
	}

	s, url := startServer(t, Config{Profile: tinyProfile(t), Loading: 20 * time.Millisecond})
	waitClosed(t, ctx, s.Ready(), "the model to load")
	if res := post(ctx, url, "/v1/chat/completions", chatBody("hi", 2, true), nil); !res.done {
		t.Errorf("after loading: %d %v %s", res.status, res.err, res.body)
	}
}

func TestNagle(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[on], func(t *testing.T) {
			t.Parallel()
			var (
				mu     sync.Mutex
				frames []FrameInfo
			)
			_, url := startServer(t, Config{Profile: tinyProfile(t), Nagle: on,
				OnFrame: func(f FrameInfo) { mu.Lock(); frames = append(frames, f); mu.Unlock() }})
			res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hi", 100, true), map[string]string{TruthHeader: "1"})
			if !res.done {
				t.Fatalf("%d %v", res.status, res.err)
			}
			held := lastTruth(t, res).HeldFrames
			content := contentEvents(t, res)
			mu.Lock()
			defer mu.Unlock()
			if len(content) != len(frames) {
				t.Fatalf("%d content events, %d frames", len(content), len(frames))
			}
			if !on {
				for _, f := range frames {
					if !f.HeldUntil.IsZero() {
						t.Fatalf("frame %d held with Nagle off", f.Index)
					}
				}
				if len(held) != 0 {
					t.Errorf("truth lists held frames with Nagle off: %v", held)
				}
				return
			}
			releases := map[time.Time]int{} // release time → frames released then
			h := 0
			for i, f := range frames {
				if f.HeldUntil.IsZero() {
					continue
				}
				releases[f.HeldUntil]++
				if h >= len(held) || held[h].Index != f.Index || held[h].HeldUs != f.HeldUntil.Sub(f.At).Microseconds() {
					t.Fatalf("truth's held frames %v disagree with frame %d held until %v", held, f.Index, f.HeldUntil)
				}
				h++
				if content[i].at.Before(f.HeldUntil) {
					t.Errorf("frame %d reached the client %v before its release", i, f.HeldUntil.Sub(content[i].at))
				}
			}
			if h != len(held) || h == 0 {
				t.Fatalf("%d frames held per OnFrame, truth lists %d", h, len(held))
			}
			coalesced := 0
			for _, n := range releases {
				coalesced = max(coalesced, n)
			}
			if coalesced < 2 {
				t.Errorf("no release carried more than one frame (%d releases for %d held frames)", len(releases), h)
			}
			var maxGap time.Duration
			for i := 1; i < len(content); i++ {
				maxGap = max(maxGap, content[i].at.Sub(content[i-1].at))
			}
			t.Logf("%d of %d frames held, in %d releases of up to %d frames; largest client gap %v", h, len(frames), len(releases), coalesced, maxGap)
		})
	}
}

func TestNewValidatesModes(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Headers: "late"},
		{PrefixCacheBlocks: -1},
		{Loading: -time.Second},
	} {
		if s, err := New(cfg); err == nil {
			s.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}
