package session

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
)

// Connection is how every part of a session reaches the server: the
// target, the credentials every call carries and the TLS settings.
type Connection struct {
	Target  string      // the base URL as given (it may hold credentials: show Shown)
	Shown   string      // Target without credentials
	APIKey  string      // the bearer token, if any
	Headers http.Header // extra headers every request carries
	Auth    http.Header // Headers plus Authorization: what every call to the target sends
	TLS     *tls.Config // nil: the system's roots
	// Timeout bounds each call before the run (detection, /tokenize).
	Timeout time.Duration
	// HTTP is how the probe's requests go: "" over HTTP/1.1, HTTP2 over
	// TLS with ALPN h2, H2C over HTTP/2 without TLS; Connections is how
	// many HTTP/2 connections their streams are spread over. The calls
	// before the run (detection, calibration) stay on HTTP/1.1, which an
	// HTTP/2 server speaks too.
	HTTP        string
	Connections int
}

// The protocols besides HTTP/1.1 (Connection.HTTP).
const (
	HTTP2 = "2"   // HTTP/2 over TLS, ALPN h2
	H2C   = "h2c" // HTTP/2 without TLS, prior knowledge
)

// probeClient returns the client the probe's requests go through.
func (c *Connection) probeClient() (*http.Client, error) {
	switch c.HTTP {
	case "":
		return probe.NewHTTPClient(c.TLS), nil
	case HTTP2:
		cfg := c.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		return probe.NewH2Client(probe.H2Config{TLS: cfg, Connections: c.Connections})
	case H2C:
		return probe.NewH2Client(probe.H2Config{H2C: true, Connections: c.Connections})
	}
	return nil, fmt.Errorf("HTTP %q: want HTTP/1.1 (\"\"), %q or %q", c.HTTP, HTTP2, H2C)
}

// Endpoint is how the calls before the run reach the target, on hc.
func (c *Connection) Endpoint(hc *http.Client) probe.Endpoint {
	return probe.Endpoint{BaseURL: c.Target, Header: c.Auth, HTTPClient: hc, Timeout: c.Timeout}
}

// scrape is what the Prometheus collector needs to reach the metrics page:
// its URL without credentials (the collector prints it) and a client that
// adds them, only where probe.ScrapeClient allows them.
func (c *Connection) scrape(metricsURL string) (string, *http.Client, error) {
	u, hc, err := probe.ScrapeClient(c.Target, metricsURL, c.Auth, c.TLS)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-url %s: %w", event.RedactURL(metricsURL), err)
	}
	return u, hc, nil
}
