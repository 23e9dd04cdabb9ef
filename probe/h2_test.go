package probe_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// runH2 sends n requests, c at a time, through the real Runner and a
// Client on hc, and returns every record.
func runH2(t *testing.T, url string, hc *http.Client, n, c, promptTokens int) []*event.Request {
	t.Helper()
	client, err := probe.NewClient(probe.ClientConfig{BaseURL: url, Dialect: probe.DialectOpenAIChat, Model: sim.DefaultModel,
		HTTPClient: hc, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	prompts, err := probe.NewPromptSource(ctx, probe.PromptConfig{
		PromptTokens: probe.Length{Mean: promptTokens}, OutputTokens: probe.Length{Mean: 8}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := probe.NewRunner(client, probe.LoadConfig{Concurrency: c, Requests: n}, prompts)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*event.Request
	if err := runner.Run(ctx, func(ev event.Event) {
		if ev.Request != nil {
			recs = append(recs, ev.Request)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	return recs
}

// stageOf returns r's client stage s, and whether it has it.
func stageOf(r *event.Request, s event.Stage) (time.Duration, bool) {
	for _, st := range r.Stages {
		if st.Stage == s {
			return st.Duration, true
		}
	}
	return 0, false
}

// checkStreams checks what every stream of an HTTP/2 run says: ok, on one
// of conns connections, each opened by exactly one stream (the one that
// paid its connect, and with tls its handshake), its frames counted.
func checkStreams(t *testing.T, recs []*event.Request, conns int, tls bool) {
	t.Helper()
	opened := map[int]int{}
	for _, r := range recs {
		if !r.OK() || r.HTTP2 == nil {
			t.Fatalf("request %s: outcome %s (%s), http2 %+v", r.ID, r.Outcome, r.Error, r.HTTP2)
		}
		h := r.HTTP2
		if h.Conn < 1 || h.Conn > conns || h.Stream == 0 || h.Stream%2 != 1 || h.DataFrames < 1 {
			t.Errorf("request %s: %+v: want a connection 1 to %d, an odd stream id, DATA frames", r.ID, *h, conns)
		}
		if h.FirstData <= 0 || h.FirstData > r.TTFT {
			t.Errorf("request %s: first DATA frame at %v, TTFT %v: want it within the TTFT", r.ID, h.FirstData, r.TTFT)
		}
		for _, s := range []event.Stage{event.StageConnect, event.StageTLS, event.StageWrite, event.StageWaitHeaders, event.StageFirstToken} {
			if _, ok := stageOf(r, s); !ok {
				t.Errorf("request %s: no %s stage in %v", r.ID, s, r.Stages)
			}
		}
		connect, _ := stageOf(r, event.StageConnect)
		handshake, _ := stageOf(r, event.StageTLS)
		if r.ReusedConn {
			if connect != 0 || handshake != 0 {
				t.Errorf("request %s on an open connection: connect %v, tls %v; want 0", r.ID, connect, handshake)
			}
			continue
		}
		opened[h.Conn]++
		if connect <= 0 || tls != (handshake > 0) {
			t.Errorf("request %s opened connection %d: connect %v, tls %v (TLS: %v)", r.ID, h.Conn, connect, handshake, tls)
		}
	}
	if len(opened) != conns {
		t.Errorf("connections opened by a stream: %v; want each of %d once", opened, conns)
	}
	for c, n := range opened {
		if n != 1 {
			t.Errorf("connection %d opened by %d streams, want 1", c, n)
		}
	}
}

func TestH2CStreamsSpreadOverTheConnectionsAsked(t *testing.T) {
	url := simtest.ServeTiny(t, sim.Config{H2C: true, ServerTiming: true})
	tr, err := probe.NewH2Transport(probe.H2Config{H2C: true, Connections: 3})
	if err != nil {
		t.Fatal(err)
	}
	recs := runH2(t, url, &http.Client{Transport: tr}, 24, 6, 32)
	checkStreams(t, recs, 3, false)
	if st := tr.Stats(); st.Connections != 3 || st.GoAwayRetries != 0 {
		t.Errorf("stats %+v, want 3 connections and no retry", st)
	}
}

func TestH2OverTLSNegotiatesH2(t *testing.T) {
	cfg, certPEM, err := sim.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	url := simtest.ServeTiny(t, sim.Config{TLS: cfg, ServerTiming: true})
	tr, err := probe.NewH2Transport(probe.H2Config{TLS: &tls.Config{RootCAs: roots}, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	recs := runH2(t, url, &http.Client{Transport: tr}, 12, 4, 32)
	checkStreams(t, recs, 2, true)
	if st := tr.Stats(); st.Connections != 2 {
		t.Errorf("stats %+v, want 2 connections", st)
	}
}

func TestH2RefusesAServerWithoutH2InALPN(t *testing.T) {
	cfg, certPEM, err := sim.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	cfg.NextProtos = []string{"http/1.1"}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ErrorLog: log.New(io.Discard, "", 0)}
	var p http.Protocols
	p.SetHTTP1(true)
	srv.Protocols = &p
	url := serveTLS(t, srv, cfg)
	hc, err := probe.NewH2Client(probe.H2Config{TLS: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(url)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %s from a server that does not speak h2", resp.Proto)
	}
}

func TestH2ConfigChecked(t *testing.T) {
	for _, cfg := range []probe.H2Config{{H2C: true, Connections: -1}, {H2C: true, Connections: probe.MaxH2Connections + 1}, {}} {
		if _, err := probe.NewH2Transport(cfg); err == nil {
			t.Errorf("NewH2Transport(%+v) took it", cfg)
		}
	}
}

// serveTLS serves srv over TLS with cfg on a loopback port until the test
// ends and returns its URL.
func serveTLS(t *testing.T, srv *http.Server, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return "https://" + ln.Addr().String()
}
