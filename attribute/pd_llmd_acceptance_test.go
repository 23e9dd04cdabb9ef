//go:build acceptance

package attribute

// llm-d's prefill/decode disaggregation with real servers: two
// llm-d-inference-sim processes, one answering the prefill leg and one the
// decode leg, behind a two-phase proxy that sends them what llm-d's routing
// sidecar (cmd/pd-sidecar, NIXL v2 connector) sends. The sidecar itself is
// not used: see docs/servers.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
)

// llmdSimEnv names the llm-d-inference-sim binary the test runs.
const llmdSimEnv = "LATSCOPE_LLMD_SIM"

// TestAcceptanceLLMDPrefillDecode: a prefill pod (time to first token
// 40 ms) and a decode pod (KV-cache transfer latency 60 ms) behind the
// two-phase proxy; 60 streams, two at a time. Every request succeeds; the
// proxy's Server-Timing (pd_prefill_leg, pd_remote_decode_leg: named so
// that latscope, which orders stages it does not know by name, shows them
// in the order they ran) reaches the breakdown as the server's own stages;
// the decode leg, which llm-d-inference-sim spends
// on its simulated KV transfer, is within 5% of the configured 60 ms; and
// the stages add up to the TTFT with an unattributed rest of at most 3 ms.
func TestAcceptanceLLMDPrefillDecode(t *testing.T) {
	bin := os.Getenv(llmdSimEnv)
	if bin == "" {
		t.Skip("SKIPPED: " + llmdSimEnv + " does not name an llm-d-inference-sim binary, so the prefill/decode check against it did not run")
	}
	const kvLatency = 60 * time.Millisecond
	common := []string{"--model", "pd-sim", "--inter-token-latency", "5ms", "--max-num-seqs", "16", "--mode", "random"}
	prefill := startLLMDSim(t, bin, append(common, "--time-to-first-token", "40ms"))
	decode := startLLMDSim(t, bin, append(common, "--kv-cache-transfer-latency", kvLatency.String()))
	proxy := httptest.NewServer(&twoPhaseProxy{prefill: prefill, decode: decode, client: &http.Client{Timeout: 30 * time.Second}})
	t.Cleanup(proxy.Close)

	client, err := probe.NewClient(probe.ClientConfig{BaseURL: proxy.URL, Dialect: probe.DialectOpenAIChat, Model: "pd-sim", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{PromptTokens: probe.Length{Mean: 256}, OutputTokens: probe.Length{Mean: 16}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, probe.LoadConfig{Concurrency: 2, Requests: 60, Warmup: 2}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := runPipeline(ctx, t, pipeline.Config{Primary: []pipeline.Source{runner}, Stage: NewAttributor(AttributorConfig{})})
	var n int
	var worst, maxRest float64
	var example *event.Request
	for _, r := range got {
		if r.Warmup {
			continue
		}
		n++
		if !r.OK() {
			t.Fatalf("%s: %s (%s)", r.ID, r.Outcome, r.Error)
		}
		checkSum(t, r, r.Breakdown)
		pre, okP := stageOf(r, event.ServerTimingPrefix+"pd_prefill_leg")
		dec, okD := stageOf(r, event.ServerTimingPrefix+"pd_remote_decode_leg")
		if !okP || !okD || pre.Provenance != event.ServerReported || dec.Provenance != event.ServerReported {
			t.Errorf("%s: the proxy's legs are not both in the breakdown, server-reported: %+v", r.ID, r.Breakdown)
			continue
		}
		off := math.Abs(float64(dec.Duration-kvLatency)) / float64(kvLatency)
		worst = max(worst, off)
		if off > 0.05 {
			t.Errorf("%s: decode leg %v, the decode pod's KV transfer is %v: more than 5%% apart", r.ID, dec.Duration, kvLatency)
		}
		u, _ := stageOf(r, event.StageUnattributed)
		maxRest = max(maxRest, math.Abs(float64(u.Duration)/1e6))
		if math.Abs(float64(u.Duration)) > float64(3*time.Millisecond) {
			t.Errorf("%s: unattributed %v (%s), want within 3 ms", r.ID, u.Duration, u.Source)
		}
		example = r
	}
	if n != 60 {
		t.Fatalf("%d requests, want 60", n)
	}
	if example != nil {
		pre, _ := stageOf(example, event.ServerTimingPrefix+"pd_prefill_leg")
		dec, _ := stageOf(example, event.ServerTimingPrefix+"pd_remote_decode_leg")
		t.Logf("%d requests ok; e.g. TTFT %v = prefill leg %v + decode leg %v + the rest; decode leg at most %.2f%% from %v; |unattributed| at most %.3f ms",
			n, example.TTFT, pre.Duration, dec.Duration, 100*worst, kvLatency, maxRest)
	}
}

// startLLMDSim runs llm-d-inference-sim with args on a free loopback port
// until the test ends, and returns its base URL once it answers.
func startLLMDSim(t *testing.T, bin string, args []string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	var out bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--port", fmt.Sprint(port)}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/models")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llm-d-inference-sim on port %d did not answer in 30 s: %v\n%s", port, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// twoPhaseProxy sends each chat request as llm-d's routing sidecar does
// with the NIXL v2 connector: first to the prefill pod, not streamed, with
// max_tokens 1 and kv_transfer_params asking for a remote decode; then to
// the decode pod, as the client sent it, with the kv_transfer_params the
// prefill pod returned. It relays the decode pod's answer, adding a
// Server-Timing header of what it timed: pd_prefill_leg (the prefill
// pod's answer, from sending to its whole body) and pd_remote_decode_leg
// (from sending to the decode pod to its response headers, which llm-d-inference-sim sends
// with the first token).
type twoPhaseProxy struct {
	prefill, decode string
	client          *http.Client
}

func (p *twoPhaseProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var req map[string]any
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, "bad request body: "+fmt.Sprint(err), http.StatusBadRequest)
		return
	}
	start := time.Now()
	params, err := p.prefillLeg(r, req)
	if err != nil {
		http.Error(w, "prefill: "+err.Error(), http.StatusBadGateway)
		return
	}
	prefillDur := time.Since(start)
	req["kv_transfer_params"] = params
	dbody, err := json.Marshal(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	decodeStart := time.Now()
	resp, err := p.post(r, p.decode, dbody)
	if err != nil {
		http.Error(w, "decode: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	decodeDur := time.Since(decodeStart)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Add("Server-Timing", fmt.Sprintf(`pd_prefill_leg;dur=%.3f;desc="prefill pod, max_tokens 1", pd_remote_decode_leg;dur=%.3f;desc="decode pod, to its headers"`,
		durMS(prefillDur), durMS(decodeDur)))
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// prefillLeg sends the prefill request and returns the kv_transfer_params
// of the prefill pod's answer.
func (p *twoPhaseProxy) prefillLeg(r *http.Request, req map[string]any) (any, error) {
	pre := make(map[string]any, len(req)+1)
	for k, v := range req {
		pre[k] = v
	}
	pre["kv_transfer_params"] = map[string]any{
		"do_remote_decode": true, "do_remote_prefill": false,
		"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil,
	}
	pre["stream"] = false
	delete(pre, "stream_options")
	for _, f := range []string{"max_tokens", "max_completion_tokens"} {
		pre[f] = 1
	}
	body, err := json.Marshal(pre)
	if err != nil {
		return nil, err
	}
	resp, err := p.post(r, p.prefill, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var ans struct {
		KVTransferParams any `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, err
	}
	if ans.KVTransferParams == nil {
		return nil, fmt.Errorf("no kv_transfer_params in the prefill pod's answer: %.200s", b)
	}
	return ans.KVTransferParams, nil
}

func (p *twoPhaseProxy) post(r *http.Request, base string, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), http.MethodPost, base+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header.Set("Content-Type", "application/json")
	if id := r.Header.Get("X-Request-Id"); id != "" {
		out.Header.Set("X-Request-Id", id)
	}
	return p.client.Do(out)
}

func durMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
