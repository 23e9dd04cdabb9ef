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
