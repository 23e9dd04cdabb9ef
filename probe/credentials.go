package probe

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
)

// ScrapeClient prepares a client for page, a page served beside target
// (its metrics), and returns page's URL without its user:password. page's
// own user:password becomes basic auth; target's credentials (auth: the API
// key and headers, and target's own user:password) go with it only when page
// is on target's scheme and host, so that they never reach another host.
func ScrapeClient(target, page string, auth http.Header, tlsConfig *tls.Config) (string, *http.Client, error) {
	m, err := url.Parse(page)
	if err != nil || (m.Scheme != "http" && m.Scheme != "https") || m.Host == "" {
		return "", nil, errors.New("want http(s)://host[:port]/path")
	}
	t, err := url.Parse(target)
	if err != nil {
		return "", nil, err
	}
	header := http.Header{}
	user := m.User
	if m.Scheme == t.Scheme && m.Host == t.Host {
		header = auth.Clone()
		if user == nil {
			user = t.User
		}
	}
	if user != nil && header.Get("Authorization") == "" {
		pw, _ := user.Password()
		req := &http.Request{Header: http.Header{}}
		req.SetBasicAuth(user.Username(), pw)
		header.Set("Authorization", req.Header.Get("Authorization"))
	}
	m.User = nil
	hc := NewHTTPClient(tlsConfig)
	if len(header) > 0 {
		hc.Transport = &headerTransport{header: header, next: hc.Transport}
	}
	return m.String(), hc, nil
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	header http.Header
	next   http.RoundTripper
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	for k, vs := range t.header {
		req.Header[k] = vs[:len(vs):len(vs)] // shared and read-only: an append elsewhere must copy
	}
	return t.next.RoundTrip(req)
}

// CloseIdleConnections passes the call on, so http.Client's reaches the
// transport underneath.
func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
