package sim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startDeployed serves a new Server as d deploys it on a loopback port
// until the test ends.
func startDeployed(t *testing.T, cfg Config, d Deployment) (*Server, string) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, s, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(2 * shutdownGrace):
			t.Errorf("Serve did not return within %v of its context's end", 2*shutdownGrace)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

// timings reads the Server-Timing metrics of h into milliseconds by name.
func timings(t *testing.T, h http.Header) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, v := range h.Values(ServerTimingHeader) {
		for _, m := range strings.Split(v, ",") {
			name, dur, ok := strings.Cut(strings.TrimSpace(m), ";dur=")
			if !ok {
				t.Errorf("metric %q has no dur", m)
				continue
			}
			d, err := strconv.ParseFloat(dur, 64)
			if err != nil {
				t.Errorf("metric %q: %v", m, err)
			}
			out[name] = d
		}
	}
	return out
}

func usOf(ms float64) int64 { return int64(ms*1000 + 0.5) }

// TestServerTimingIsTheTruth: with Config.ServerTiming a stream's header
// reports the front end's stages and the time to the headers, and its
// trailer every first-frame stage, each exactly the truth's; without it,
// neither.
func TestServerTimingIsTheTruth(t *testing.T) {
	t.Parallel()
	truths := make(chan Truth, 1)
	_, url := startServer(t, Config{Profile: tinyProfile(t), ServerTiming: true, OnFinish: func(tr Truth) { truths <- tr }})
	res := post(testCtx(t, 10*time.Second), url, "/v1/chat/completions", chatBody("hello there", 4, true),
		map[string]string{TruthHeader: "1"})
	if res.err != nil || res.status != http.StatusOK || !res.done {
		t.Fatalf("status %d, err %v, done %v", res.status, res.err, res.done)
	}
	tr := <-truths
	head := timings(t, res.header)
	if usOf(head["http"]) != tr.HTTPUs || usOf(head["tokenize"]) != tr.TokenizeUs {
		t.Errorf("header %v, truth http %d µs tokenize %d µs", head, tr.HTTPUs, tr.TokenizeUs)
	}
	if h := usOf(head["headers"]); h <= 0 || h > tr.HeadersUs {
		t.Errorf("header's time to headers %d µs, want within (0, the truth's %d µs]", h, tr.HeadersUs)
	}
	trailer := timings(t, res.trailer)
	want := map[string]int64{"first_frame": tr.ArrivalToFirstFrameUs, "decode": tr.DecodeUs, "sse_framing": tr.FramingUs}
	for _, s := range tr.Stages() {
		switch s.Name {
		case "framing":
		case "fault_delay":
			if s.Us > 0 {
				want[s.Name] = s.Us
			}
		default:
			want[s.Name] = s.Us
		}
	}
	if len(trailer) != len(want) {
		t.Errorf("trailer %v, want the metrics %v", trailer, want)
	}
	for name, us := range want {
		if got, ok := trailer[name]; !ok || usOf(got) != us {
			t.Errorf("trailer %s = %v ms (present %v), truth %d µs", name, got, ok, us)
		}
	}

	_, plain := startServer(t, Config{Profile: tinyProfile(t)})
	res = post(testCtx(t, 10*time.Second), plain, "/v1/chat/completions", chatBody("hello there", 4, true), nil)
	if res.err != nil || !res.done {
		t.Fatalf("without Server-Timing: err %v, done %v", res.err, res.done)
	}
	if v := res.header.Values(ServerTimingHeader); len(v) > 0 || len(res.trailer.Values(ServerTimingHeader)) > 0 {
		t.Errorf("Server-Timing without the mode: header %v, trailer %v", v, res.trailer)
	}
}

// TestProxyHop: behind the proxy a stream gets the server's Server-Timing
// and the proxy's own metric, which holds the server's time to its
// headers; the trailer passes through; the truth holds the proxy's part,
// and a start a client sends is not taken for the proxy's.
func TestProxyHop(t *testing.T) {
	t.Parallel()
	truths := make(chan Truth, 1)
	_, url := startDeployed(t, Config{Profile: tinyProfile(t), ServerTiming: true, OnFinish: func(tr Truth) { truths <- tr }},
		Deployment{})
	early := strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10)
	res := post(testCtx(t, 10*time.Second), url, "/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 3, "stream": true},
		map[string]string{ProxyStartHeader: early})
	if res.err != nil || res.status != http.StatusOK || !res.done {
		t.Fatalf("status %d, err %v, done %v", res.status, res.err, res.done)
	}
	tr := <-truths
	head := timings(t, res.header)
	proxy, hasProxy := head["proxy"]
	headers, hasHeaders := head["headers"]
	if !hasProxy || !hasHeaders || proxy < headers {
		t.Errorf("header %v: want a proxy metric holding the server's time to its headers", head)
	}
	// The reported stage (the proxy's time less the server's time to its
	// headers) holds the truth's proxy part and the headers' flush.
	if stage := usOf(proxy) - usOf(headers); tr.ProxyUs <= 0 || tr.ProxyUs > stage+2 {
		t.Errorf("truth's proxy part %d µs, want within (0, the reported stage %d µs]: the client's start is not the proxy's", tr.ProxyUs, stage)
	}
	if trailer := timings(t, res.trailer); usOf(trailer["first_frame"]) != tr.ArrivalToFirstFrameUs {
		t.Errorf("trailer through the proxy %v, want first_frame %d µs", trailer, tr.ArrivalToFirstFrameUs)
	}
	health, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	health.Body.Close()
	if health.StatusCode != http.StatusOK {
		t.Errorf("/health through the proxy: %d", health.StatusCode)
	}
}

// TestNetworkDelaysBothWays: at a distance, a request's headers come back
// no sooner than a round trip after it was sent (a bound an overloaded host
// only makes easier), and the stream is complete.
func TestNetworkDelaysBothWays(t *testing.T) {
	t.Parallel()
	const rtt = 60 * time.Millisecond
	for _, d := range []Deployment{{Network: Network{RTT: rtt}}, {NoProxy: true, Network: Network{RTT: rtt, Jitter: 5 * time.Millisecond}}} {
		t.Run(fmt.Sprintf("proxy=%v", !d.NoProxy), func(t *testing.T) {
			t.Parallel()
			_, url := startDeployed(t, Config{Profile: tinyProfile(t)}, d)
			for i := range 2 { // a new connection, then a kept-alive one
				sent := time.Now()
				res := post(testCtx(t, 10*time.Second), url, "/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 4, "stream": true}, nil)
				if res.err != nil || !res.done || len(res.events) != 4+1 { // and the finish chunk
					t.Fatalf("request %d: err %v, done %v, %d events", i, res.err, res.done, len(res.events))
				}
				if got, least := res.headersAt.Sub(sent), rtt-2*d.Network.Jitter; got < least {
					t.Errorf("request %d: headers after %v, want at least %v", i, got, least)
				}
			}
		})
	}
}

// TestNetworkKeepsOrder: with jitter on every one-way trip, bytes still
// arrive in the order they were written, none lost, both ways.
func TestNetworkKeepsOrder(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Network{RTT: 2 * time.Millisecond, Jitter: time.Millisecond, Seed: 7}.Listener(raw)
	defer ln.Close()
	echoed := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			echoed <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(c, c)
		echoed <- err
	}()
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	const n = 200
	go func() {
		for i := range n {
			if _, err := c.Write([]byte{byte(i)}); err != nil {
				return
			}
		}
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	for i, b := range got {
		if b != byte(i) {
			t.Fatalf("byte %d is %d: out of order", i, b)
		}
	}
	_ = c.(*net.TCPConn).CloseWrite()
	select {
	case err := <-echoed:
		if err != nil {
			t.Errorf("echo: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the echo did not end after the client's FIN")
	}
}

func TestNetworkValidate(t *testing.T) {
	t.Parallel()
	if err := (Network{RTT: -time.Millisecond}).Validate(); err == nil {
		t.Error("a negative RTT is accepted")
	}
	if err := (Network{Jitter: -time.Millisecond}).Validate(); err == nil {
		t.Error("a negative jitter is accepted")
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if ln := (Network{}).Listener(raw); ln != raw {
		t.Error("no distance still wraps the listener")
	}
}
