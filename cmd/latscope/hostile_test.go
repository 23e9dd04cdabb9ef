package main

// latscope run against servers and inputs that try to break it.

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/latscope/latscope/sim"
)

// tinySim returns a fast simulator's handler, to mount behind a gateway.
func tinySim(t *testing.T) http.Handler {
	t.Helper()
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sim.New(sim.Config{Profile: prof, MaxNumSeqs: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Handler()
}

// silentServer accepts connections and never answers; accepted receives
// one value per connection.
func silentServer(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 64)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), ch
}

// TestRunAgainstASilentServer: detection waits one --timeout, not forever,
// and says which endpoint did not answer.
func TestRunAgainstASilentServer(t *testing.T) {
	t.Parallel()
	addr, _ := silentServer(t)
	// That it returns at all, with the timeout's own error, is the check:
	// how soon depends on the host.
	_, stderr, err := execute(t, "run", "--url", "http://"+addr, "--no-tui", "-n", "1", "--no-gpu", "--timeout", "1s")
	var ee *exitError
	if err == nil || errors.As(err, &ee) && ee.code == 0 {
		t.Fatalf("err %v, want a failure", err)
	}
	if want := "GET /v1/models: no answer within 1s (raise --timeout if the server is only slow"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q\nstderr:\n%s", err, want, stderr)
	}
}

// TestRunWhenTokenizeNeverAnswers: a server that answers everything but
// /tokenize costs one --timeout at start-up; the run goes on with assumed
// prompt lengths.
func TestRunWhenTokenizeNeverAnswers(t *testing.T) {
	t.Parallel()
	h := tinySim(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			// Reading the body lets the server notice the client leave.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, stderr, err := execute(t, "run", "--url", srv.URL, "--no-tui", "-n", "2", "--no-gpu", "--no-metrics",
		"--prompt-tokens", "16", "--output-tokens", "4", "--timeout", "1s")
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "no usable tokenize endpoint (no tokenize endpoint at "+srv.URL+": POST /tokenize: no answer within 1s)") {
		t.Errorf("stderr does not say /tokenize did not answer:\n%s", stderr)
	}
}

// TestRunInterruptedDuringSetup: Ctrl-C while the server does not answer
// exits 130 at once, saying the run never started.
func TestRunInterruptedDuringSetup(t *testing.T) {
	t.Parallel()
	addr, accepted := silentServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-accepted // detection is under way
		cancel()
	}()
	stdout, _, err := executeCtx(t, ctx, "run", "--url", "http://"+addr, "--no-tui", "-n", "1", "--no-gpu", "--timeout", "1m")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitInterrupted || !strings.Contains(err.Error(), "interrupted before the run started") {
		t.Fatalf("err %v, want exit %d: interrupted before the run started", err, exitInterrupted)
	}
	if stdout != "" {
		t.Errorf("a summary of a run that never started:\n%s", stdout)
	}
}

// TestRunKeepsSecretsOutOfItsOutput: credentials in --url and
// --metrics-url, an API key and header values appear nowhere in what a run
// prints, whether it succeeds or fails.
func TestRunKeepsSecretsOutOfItsOutput(t *testing.T) {
	t.Parallel()
	url := serveTinySim(t)
	secrets := []string{"url-secret-1", "sk-key-secret-2", "hdr-secret-value-3", "metrics-secret-4", "bad-header-secret-5"}
	withCreds := strings.Replace(url, "://", "://alice:url-secret-1@", 1)
	common := []string{"--no-tui", "-n", "3", "--no-gpu", "--prompt-tokens", "16", "--output-tokens", "4",
		"--api-key", "sk-key-secret-2", "--header", "X-Api-Key: hdr-secret-value-3", "--scrape-interval", "100ms"}
	refused := "http://alice:url-secret-1@127.0.0.1:1" // port 1: nothing listens there
	runs := [][]string{
		append([]string{"run", "--url", withCreds, "--json", "--metrics-url", strings.Replace(url, "://", "://bob:metrics-secret-4@", 1) + "/metrics"}, common...),
		append([]string{"run", "--url", withCreds}, common...),
		append([]string{"run", "--url", refused, "--dialect", "openai-chat", "--model", "m"}, common...),
		append([]string{"run", "--url", refused}, common...),
		{"run", "--url", withCreds, "--header", "X-Api-Key bad-header-secret-5"},
		{"run", "--url", withCreds, "--header", "X-Api-Key: bad-header-secret-5\x01"},
		{"run", "--url", "ftp://alice:url-secret-1@host"},
	}
	for _, args := range runs {
		stdout, stderr, err := execute(t, args...)
		all := stdout + stderr
		if err != nil {
			all += err.Error()
		}
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("latscope %s: output shows %q:\n%s", strings.Join(args, " "), s, all)
			}
		}
	}
}

// TestRunRefusesRedirectsToAnotherHost: a server that redirects elsewhere
// does not get the credentials sent there.
func TestRunRefusesRedirectsToAnotherHost(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(elsewhere.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	_, _, err := execute(t, "run", "--url", srv.URL, "--no-tui", "-n", "1", "--no-gpu",
		"--header", "X-Api-Key: hdr-secret", "--api-key", "sk-secret")
	if err == nil || !strings.Contains(err.Error(), "the server redirected to "+elsewhere.URL) {
		t.Fatalf("err %v, want it to name the refused redirect", err)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the other host got %d requests", n)
	}
}

// keyGateway puts the simulator behind a gateway that wants X-Api-Key: key.
func keyGateway(t *testing.T, key string) string {
	t.Helper()
	h := tinySim(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRunThroughAGatewayThatWantsAKey: detection and /tokenize send the
// key; without it the error says the key was refused.
func TestRunThroughAGatewayThatWantsAKey(t *testing.T) {
	t.Parallel()
	url := keyGateway(t, "gw-key")
	_, stderr, err := execute(t, "run", "--url", url, "--no-tui", "-n", "2", "--no-gpu", "--no-metrics",
		"--prompt-tokens", "16", "--output-tokens", "4", "--header", "X-Api-Key: gw-key")
	if err != nil {
		t.Fatalf("run with the key: %v\nstderr:\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "server latscope-sim") || strings.Contains(stderr, "no usable tokenize endpoint") {
		t.Errorf("with the key, detection and /tokenize should work:\n%s", stderr)
	}
	_, _, err = execute(t, "run", "--url", url, "--no-tui", "-n", "1", "--no-gpu")
	if err == nil || !strings.Contains(err.Error(), "GET /v1/models answered 401 Unauthorized: invalid api key (give the key with --api-key or --header)") {
		t.Fatalf("without the key: %v", err)
	}
}

// TestRunNamedDialectNeedsAModel: with --dialect and no --model, the model
// comes from the server's list, and none there is an error, not model "".
func TestRunNamedDialectNeedsAModel(t *testing.T) {
	t.Parallel()
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(empty.Close)
	_, _, err := execute(t, "run", "--url", empty.URL, "--dialect", "openai-chat", "--no-tui", "-n", "1", "--no-gpu")
	if err == nil || !strings.Contains(err.Error(), "--dialect openai-chat needs a model: none given with --model, and the server lists none") {
		t.Fatalf("err %v, want a refusal naming --model", err)
	}
	_, _, err = execute(t, "run", "--url", empty.URL, "--no-tui", "-n", "1", "--no-gpu")
	if err == nil || !strings.Contains(err.Error(), "the openai server at "+empty.URL+" lists no model; give one with --model") {
		t.Fatalf("auto dialect: err %v, want a refusal naming --model", err)
	}
	_, stderr, err := execute(t, "run", "--url", serveTinySim(t), "--dialect", "openai-chat", "--no-tui", "-n", "1",
		"--no-gpu", "--no-metrics", "--prompt-tokens", "16", "--output-tokens", "4")
	if err != nil || !strings.Contains(stderr, `model "`+sim.DefaultModel+`"`) {
		t.Fatalf("err %v, want the listed model used:\n%s", err, stderr)
	}
}

// TestRunFallsBackWhenTokenizeFails: a /tokenize that answers the first
// call and then 503s does not abort the run; a line says lengths are
// assumed.
func TestRunFallsBackWhenTokenizeFails(t *testing.T) {
	t.Parallel()
	h := tinySim(t)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" && calls.Add(1) > 1 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, stderr, err := execute(t, "run", "--url", srv.URL, "--no-tui", "-n", "2", "--no-gpu", "--no-metrics",
		"--prompt-tokens", "16", "--output-tokens", "4")
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "the tokenize endpoint failed during calibration") || !strings.Contains(stderr, "503") {
		t.Errorf("stderr does not say calibration fell back:\n%s", stderr)
	}
}

// TestRunTLS: an https server with its own certificate authority is
// measured with --ca-cert or --insecure (announced), and refused with a
// hint without either.
func TestRunTLS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(tinySim(t))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--url", srv.URL, "--no-tui", "--json", "-n", "2", "--no-gpu", "--prompt-tokens", "16", "--output-tokens", "4", "--scrape-interval", "50ms"}
	if _, stderr, err := execute(t, append(args, "--ca-cert", ca)...); err != nil || strings.Contains(stderr, "no usable tokenize endpoint") {
		t.Fatalf("--ca-cert: %v\nstderr:\n%s", err, stderr)
	}
	_, stderr, err := execute(t, append(args, "--insecure")...)
	if err != nil || !strings.Contains(stderr, "WARNING: --insecure: TLS certificates are NOT verified") {
		t.Fatalf("--insecure: %v, want a loud warning\nstderr:\n%s", err, stderr)
	}
	_, _, err = execute(t, args...)
	if err == nil || !strings.Contains(err.Error(), "--ca-cert FILE") {
		t.Fatalf("no CA: err %v, want a hint at --ca-cert", err)
	}
}
