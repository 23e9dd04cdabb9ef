package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		want Fault
		err  bool
	}{
		{"", Fault{}, false},
		{"status=429", Fault{Status: 429}, false},
		{" reset-after=0 , stall=20", Fault{Reset: true, Stall: 20 * time.Millisecond}, false},
		{"malformed-after=3,oversized,split-utf8,slow-headers=5", Fault{Malformed: true, MalformedAfter: 3, Oversized: true, SplitUTF8: true, SlowHeaders: 5 * time.Millisecond}, false},
		{"status=200", Fault{}, true},
		{"status", Fault{}, true},
		{"stall=-1", Fault{}, true},
		{"stall=99999999", Fault{}, true},
		{"oversized=1", Fault{}, true},
		{"boom", Fault{}, true},
	} {
		got, err := ParseFault(tc.spec)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseFault(%q) = %+v, %v", tc.spec, got, err)
		}
		if err == nil {
			if back, err := ParseFault(got.String()); err != nil || back != got {
				t.Errorf("round trip of %q: %+v, %v", got.String(), back, err)
			}
		}
	}
}

func faultHdr(spec string) map[string]string {
	return map[string]string{FaultHeader: spec, TruthHeader: "1"}
}

func TestFaultStatus(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	ctx := testCtx(t, 10*time.Second)
	for _, code := range []int{429, 500, 503} {
		res := post(ctx, url, "/v1/chat/completions", chatBody("hi", 4, true), faultHdr("status="+strconv.Itoa(code)))
		if res.status != code {
			t.Fatalf("status = %d, want %d", res.status, code)
		}
		var body struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil || body.Error.Code != code {
			t.Errorf("%d body %s: %v", code, res.body, err)
		}
		if ra := res.header.Get("Retry-After"); (code == 429) && ra == "" {
			t.Errorf("%d without Retry-After", code)
		}
	}
}

func TestFaultResetAfter(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	ctx := testCtx(t, 10*time.Second)
	res := post(ctx, url, "/v1/chat/completions", chatBody("hi", 10, true), faultHdr("reset-after=3"))
	if res.done {
		t.Fatal("stream ended cleanly despite reset-after")
	}
	if got := len(contentEvents(t, res)); got != 3 {
		t.Errorf("content frames before the reset = %d, want 3", got)
	}
	if !errors.Is(res.err, syscall.ECONNRESET) {
		t.Errorf("read error = %v, want connection reset", res.err)
	}
	// Non-streaming: the connection is reset instead of answered.
	body := chatBody("hi", 3, false)
	res = post(ctx, url, "/v1/chat/completions", body, faultHdr("reset-after=0"))
	if res.err == nil {
		t.Errorf("non-streaming reset: got status %d and no error", res.status)
	}
	// The server is still healthy.
	if res := post(ctx, url, "/v1/chat/completions", chatBody("hi", 3, true), nil); !res.done {
		t.Errorf("request after a reset failed: %v", res.err)
	}
}

func TestFaultMalformedAfter(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	res := post(testCtx(t, 10*time.Second), url, "/v1/completions",
		map[string]any{"prompt": "hi", "max_tokens": 6, "ignore_eos": true, "stream": true}, faultHdr("malformed-after=2"))
	if !res.done {
		t.Fatalf("stream did not finish: %v", res.err)
	}
	bad, good := -1, 0
	for i, e := range res.events {
		if !json.Valid(e.data) {
			if bad >= 0 {
				t.Errorf("second malformed event at %d", i)
			}
			bad = i
			if good != 2 {
				t.Errorf("malformed event after %d content frames, want 2", good)
			}
			continue
		}
		var c parsedChunk
		_ = json.Unmarshal(e.data, &c)
		if _, ok := c.content(); ok {
			good++
		}
	}
	if bad < 0 || good != 6 {
		t.Errorf("malformed at %d, %d good content frames", bad, good)
	}
}

func TestFaultStall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var made []time.Time // each frame's token, by the engine's clock
	_, url := startServer(t, Config{Profile: tinyProfile(t),
		OnFrame: func(f FrameInfo) { mu.Lock(); made = append(made, f.TokenAt); mu.Unlock() }})
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hi", 10, true), faultHdr("stall=150"))
	if !res.done {
		t.Fatalf("stream failed: %v", res.err)
	}
	tr := lastTruth(t, res)
	if g := tr.DecodeGapsUs[4]; g < 150_000 {
		t.Errorf("truth gap after token 5 = %d us, want >= 150000 (gaps %v)", g, tr.DecodeGapsUs)
	}
	// As the client sees it: frame 6 arrives at least the stall after token
	// 5 was made. (Measured from the client's receipt of frame 5, the gap is
	// shorter by however late the loop flushed it and the client read it.)
	frames := contentEvents(t, res)
	mu.Lock()
	defer mu.Unlock()
	if len(frames) != 10 || len(made) != 10 {
		t.Fatalf("%d frames received, %d flushed; want 10", len(frames), len(made))
	}
	if got := frames[5].at.Sub(made[4]); got < 150*time.Millisecond {
		t.Errorf("frame 6 reached the client %v after token 5 was made, want the 150ms stall", got)
	}
}

func TestFaultSlowHeaders(t *testing.T) {
	// Not parallel: timing-sensitive, so it runs alone.
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	body, _ := json.Marshal(chatBody("hi", 3, true))
	req, _ := http.NewRequestWithContext(testCtx(t, 10*time.Second), http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set(FaultHeader, "slow-headers=150")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("headers after %v, want at least 150ms", d)
	}
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hi", 3, true), faultHdr("slow-headers=150"))
	if tr := lastTruth(t, res); tr.FaultDelayUs < 150_000 {
		t.Errorf("truth fault_delay_us = %d", tr.FaultDelayUs)
	}
}

func TestFaultOversized(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hi", 6, true), faultHdr("oversized"))
	if !res.done {
		t.Fatalf("stream failed: %v", res.err)
	}
	big := 0
	for _, e := range res.events {
		if len(e.data) > 1<<20 {
			big++
			if !json.Valid(e.data) {
				t.Error("oversized event is not valid JSON")
			}
		}
	}
	if big != 1 {
		t.Errorf("%d events over 1 MiB, want 1", big)
	}
}

func TestFaultSplitUTF8(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hi", 8, true), faultHdr("split-utf8"))
	if !res.done {
		t.Fatalf("stream failed: %v", res.err)
	}
	frames := contentEvents(t, res)
	if len(frames) != 8 {
		t.Fatalf("%d content frames, want 8", len(frames))
	}
	var joined []byte
	replaced := 0
	for _, f := range frames {
		text, _ := parseChunk(t, f.data).content()
		replaced += strings.Count(text, "\uFFFD")
		// The raw content between the quotes, as the server wrote it.
		i := bytes.Index(f.data, []byte(`"content":"`))
		j := bytes.Index(f.data[i+11:], []byte(`"`))
		joined = append(joined, f.data[i+11:i+11+j]...)
	}
	if replaced != 2 {
		t.Errorf("chunks decoded alone show %d U+FFFD, want 2", replaced)
	}
	if !bytes.Contains(joined, []byte(" café")) {
		t.Errorf("joined raw content %q lacks \" café\"", joined)
	}
}

func TestConfiguredFaultRate(t *testing.T) {
	t.Parallel()
	f, err := ParseFault("status=503")
	if err != nil {
		t.Fatal(err)
	}
	_, url := startServer(t, Config{Profile: tinyProfile(t), Fault: f, FaultRate: 0.5, Seed: 3})
	ctx := testCtx(t, 10*time.Second)
	codes := map[int]int{}
	for i := 0; i < 20; i++ {
		res := post(ctx, url, "/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 1}, nil)
		codes[res.status]++
	}
	if codes[503] == 0 || codes[200] == 0 || codes[503]+codes[200] != 20 {
		t.Errorf("status counts = %v, want a mix of 200 and 503", codes)
	}
}
