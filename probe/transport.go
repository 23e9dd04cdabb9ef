package probe

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// NewTransport returns the probe's default transport: enough idle
// connections per host for hundreds of concurrent streams, HTTP/1.1 only,
// no proxy (it would add its own latency to every number), no compression
// (gzip would buffer the stream and hide token timing), and connections
// that say when each read's bytes reached the host (see arrival.go).
func NewTransport() *http.Transport {
	tr := NewPlainTransport()
	tr.DialContext = stampingDialer(newDialer())
	return tr
}

// NewPlainTransport is NewTransport with connections that keep no receive
// times: a plain net/http client's, the baseline the benchmarks compare
// the probe with.
func NewPlainTransport() *http.Transport {
	return &http.Transport{
		DialContext:           newDialer().DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
}

func newDialer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
}

// NewHTTPClient returns a client on a NewTransport that verifies TLS with
// tlsConfig (nil: the system's roots) and never follows a redirect to
// another host (see CheckRedirect). Every call latscope makes to the
// server under test goes through such a client.
func NewHTTPClient(tlsConfig *tls.Config) *http.Client {
	tr := NewTransport()
	if tlsConfig != nil {
		tr.TLSClientConfig = tlsConfig.Clone()
	}
	return &http.Client{Transport: tr, CheckRedirect: CheckRedirect}
}

// maxRedirects is how many redirects one call follows.
const maxRedirects = 10

// CheckRedirect is the redirect policy of every client the probe uses: a
// redirect is followed only to the same host and port, and never from
// https to http. net/http drops Authorization on a redirect to another
// host but forwards every other header, so an X-Api-Key given with
// --header would reach whatever host the server names.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	from, to := via[0].URL, req.URL
	if to.Host != from.Host || from.Scheme == "https" && to.Scheme != "https" {
		return &redirectError{from: from.Scheme + "://" + from.Host, to: to.Scheme + "://" + to.Host}
	}
	return nil
}

// redirectError is a redirect CheckRedirect refused. It names hosts only:
// a redirect's URL may carry credentials or tokens.
type redirectError struct{ from, to string }

func (e *redirectError) Error() string {
	return fmt.Sprintf("the server redirected to %s; latscope follows redirects only within %s so that "+
		"--api-key and --header values never reach another host (point --url there if that is the server)", e.to, e.from)
}

// withRedirectPolicy returns hc, or http.DefaultClient when nil, as a copy
// that follows CheckRedirect whatever hc's own policy. The copy shares hc's
// transport and its connections.
func withRedirectPolicy(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	c.CheckRedirect = CheckRedirect
	return &c
}

// ParseBaseURL checks a server's base URL: http or https, a host, no query
// or fragment. Its errors show the URL with any credentials removed.
func ParseBaseURL(raw string) (*url.URL, error) {
	shown := event.RedactURL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the cause without the URL, which may hold a password
		}
		return nil, fmt.Errorf("URL %s: %v", shown, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("URL %s: want http:// or https://, not %q", shown, u.Scheme+":")
	case u.Host == "":
		return nil, fmt.Errorf("URL %s: no host: want http(s)://host[:port]", shown)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("URL %s: no query or fragment allowed", shown)
	}
	return u, nil
}

// CheckHeader reports whether name and value can be sent as an HTTP
// header. Its errors never show the value, which may be a credential.
func CheckHeader(name, value string) error {
	if name == "" {
		return errors.New("empty header name")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			// The name is not shown either: "Key sk-..." with the colon
			// forgotten would show the key.
			return fmt.Errorf("header name: character %q at position %d is not allowed in a name", name[i], i+1)
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("header %s: its value holds a control character (byte %d); the value is not shown", name, i+1)
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in a header name (an RFC 9110
// token).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
