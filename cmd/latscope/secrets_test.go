package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// TestNoOutputCarriesTheSecrets runs an agent with an API key and a token,
// recording and exporting traces, attaches to its stream with the token,
// reports the recording in every format, and looks for both secrets in
// everything that came out: stdout, stderr, the recording (decompressed
// and raw), the reports, the agent's event stream and metrics, and the
// OTLP exports.
func TestNoOutputCarriesTheSecrets(t *testing.T) {
	const apiKey, token = "sk-very-secret-api-key-7", "agent-token-secret-9"
	// A gateway in front of the simulator that wants the key.
	sim := tinySim(t)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+apiKey {
			http.Error(w, "missing key", http.StatusUnauthorized)
			return
		}
		sim.ServeHTTP(w, r)
	}))
	defer gateway.Close()
	collector := newOTLPSink(t)

	dir := t.TempDir()
	rec := filepath.Join(dir, "agent.lsr")
	agent := startAgent(t, "--url", gateway.URL, "--api-key", apiKey, "--token", token,
		"-n", "12", "-c", "3", "--prompt-tokens", "16", "--output-tokens", "4", "--no-gpu",
		"--scrape-interval", "100ms", "--record", rec, "--otlp-export", collector.url, "--linger", "1m")
	addr := agent.addr
	// The raw event stream and /metrics, as a dashboard and Prometheus see them.
	stream := readUntilEnd(t, "http://"+addr+"/events", token)
	metrics := get(t, "http://"+addr+"/metrics", token)
	attachOut, attachErr, err := execute(t, "attach", "http://"+addr, "--token", token, "--no-tui")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, attachErr)
	}
	// Stopping the agent while it waits for the collector cuts the wait
	// short (as Ctrl-C does): stop it once an export came.
	select {
	case <-collector.exported:
	case <-time.After(30 * time.Second):
		agent.wait()
		t.Fatalf("no trace was exported within 30 s:\n%s", agent.stderr.String())
	}
	agent.wait()

	outputs := map[string]string{
		"agent stdout": agent.stdout, "agent stderr": agent.stderr.String(), "attach stdout": attachOut, "attach stderr": attachErr,
		"event stream": stream, "metrics": metrics,
	}
	raw, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	outputs["recording (raw)"] = string(raw)
	zr, err := zstd.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	zr.Close()
	if err != nil || !bytes.Contains(plain, []byte(`"kind":"request"`)) {
		t.Fatalf("the recording does not decompress to events: %v", err)
	}
	outputs["recording"] = string(plain)
	replayed, _, err := execute(t, "replay", rec, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	outputs["replay"] = replayed
	for _, format := range []string{"md", "json", "csv", "html"} {
		out, stderr, err := execute(t, "report", rec, "--format", format)
		if err != nil {
			t.Fatalf("report --format %s: %v\n%s", format, err, stderr)
		}
		outputs["report "+format] = out + stderr
	}
	outputs["otlp export"] = collector.String()

	if !strings.Contains(outputs["event stream"], `"kind":"request"`) || !strings.Contains(outputs["otlp export"], "llm.request") {
		t.Fatalf("nothing to check: the stream has no requests or no trace was exported\nstream: %.300s\nexports: %.300s", stream, outputs["otlp export"])
	}
	for name, out := range outputs {
		for _, secret := range []string{apiKey, token} {
			if strings.Contains(out, secret) {
				t.Errorf("%s carries %q", name, secret)
			}
		}
	}
}

// otlpSink is an OTLP collector that keeps what it is sent: bodies
// (gunzipped) and headers.
type otlpSink struct {
	url      string
	exported chan struct{} // receives after an export
	mu       sync.Mutex
	got      bytes.Buffer
}

func newOTLPSink(t *testing.T) *otlpSink {
	s := &otlpSink{exported: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			if zr, err := gzip.NewReader(r.Body); err == nil {
				body = zr
			}
		}
		b, _ := io.ReadAll(body)
		s.mu.Lock()
		s.got.Write(b)
		for k, v := range r.Header {
			s.got.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
		s.mu.Unlock()
		select {
		case s.exported <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// String is everything sent so far.
func (s *otlpSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

// readUntilEnd reads an agent's event stream until its end frame.
func readUntilEnd(t *testing.T, url, token string) string {
	t.Helper()
	var out strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) { // the agent may not listen yet
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if sc.Text() == "event: end" {
				resp.Body.Close()
				return out.String()
			}
		}
		resp.Body.Close()
		return out.String()
	}
	t.Fatal("the agent did not serve its stream")
	return ""
}

func get(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
