package sim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveDeployed serves a new Server as d deploys it on a loopback port
// until the test ends and returns the URL clients use.
func serveDeployed(t *testing.T, cfg Config, d Deployment) string {
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
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = s.Close()
	})
	return cfg.Scheme() + "://" + ln.Addr().String()
}

// clientFor returns a client that speaks only the protocols p, trusting
// roots for HTTPS.
func clientFor(p func(*http.Protocols), roots *x509.CertPool) *http.Client {
	var protos http.Protocols
	p(&protos)
	return &http.Client{Transport: &http.Transport{Protocols: &protos, TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

// streamOver sends one chat stream through client and checks that it
// went over HTTP major version proto and came back whole, with the
// Server-Timing trailer.
func streamOver(t *testing.T, client *http.Client, url string, proto int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := chatBody(promptOf(20), 8, true)
	b["stream_options"] = map[string]any{"include_usage": true}
	res := postWith(ctx, client, url, "/v1/chat/completions", b, nil)
	if res.err != nil || res.status != http.StatusOK || !res.done {
		t.Fatalf("stream over HTTP/%d: status %d, done %v, err %v, body %q", proto, res.status, res.done, res.err, res.body)
	}
	if len(res.events) == 0 || res.trailer.Get(ServerTimingHeader) == "" {
		t.Errorf("stream over HTTP/%d: %d events, trailer %v; want events and a Server-Timing trailer", proto, len(res.events), res.trailer)
	}
	resp, err := client.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != proto {
		t.Errorf("spoke %s, want HTTP/%d", resp.Proto, proto)
	}
}

func TestH2CServesHTTP2BesideHTTP1(t *testing.T) {
	for _, noProxy := range []bool{true, false} {
		name := map[bool]string{true: "server", false: "proxy"}[noProxy]
		t.Run(name, func(t *testing.T) {
			url := serveDeployed(t, Config{Profile: tinyProfile(t), H2C: true, ServerTiming: true}, Deployment{NoProxy: noProxy})
			streamOver(t, clientFor(func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }, nil), url, 2)
			streamOver(t, clientFor(func(p *http.Protocols) { p.SetHTTP1(true) }, nil), url, 1)
		})
	}
}

func TestTLSOffersH2ThroughALPN(t *testing.T) {
	cfg, certPEM, err := SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("the generated PEM holds no certificate")
	}
	for _, noProxy := range []bool{true, false} {
		name := map[bool]string{true: "server", false: "proxy"}[noProxy]
		t.Run(name, func(t *testing.T) {
			url := serveDeployed(t, Config{Profile: tinyProfile(t), TLS: cfg, ServerTiming: true}, Deployment{NoProxy: noProxy})
			if !strings.HasPrefix(url, "https://") {
				t.Fatalf("URL %s: want https", url)
			}
			streamOver(t, clientFor(func(p *http.Protocols) { p.SetHTTP2(true) }, roots), url, 2)
			streamOver(t, clientFor(func(p *http.Protocols) { p.SetHTTP1(true) }, roots), url, 1)
		})
	}
}

func TestFrontValidate(t *testing.T) {
	tlsCfg, _, err := SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"h2c with TLS", Config{H2C: true, TLS: tlsCfg}, "h2c is HTTP/2 without TLS"},
		{"h2c with nagle", Config{H2C: true, Nagle: true}, "plain HTTP/1.1"},
		{"TLS with close-after-stream", Config{TLS: tlsCfg, CloseAfterStream: true}, "plain HTTP/1.1"},
		{"TLS without a certificate", Config{TLS: &tls.Config{}}, "without a certificate"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := NewProxy(ProxyConfig{Upstream: "http://127.0.0.1:1", H2C: true, TLS: tlsCfg}); err == nil {
		t.Error("NewProxy took h2c with TLS")
	}
}
