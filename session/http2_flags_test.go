package session

import (
	"strings"
	"testing"
)

func TestHTTPVersionFlags(t *testing.T) {
	for _, c := range []struct {
		http2, h2c  bool
		connections int
		url         string
		want, err   string
	}{
		{connections: 1, url: "http://h:1"},
		{connections: 0, url: "http://h:1"}, // demo: no HTTP/2 flags
		{h2c: true, connections: 4, url: "http://h:1", want: H2C},
		{http2: true, connections: 2, url: "https://h:1", want: HTTP2},
		{http2: true, h2c: true, connections: 1, url: "https://h:1", err: "give one"},
		{http2: true, connections: 1, url: "http://h:1", err: "needs an https:// URL"},
		{h2c: true, connections: 1, url: "https://h:1", err: "without TLS"},
		{h2c: true, connections: 0, url: "http://h:1", err: "want 1 to"},
		{connections: 3, url: "http://h:1", err: "give --http2 or --h2c"},
	} {
		f := Spec{HTTP2: c.http2, H2C: c.h2c, Connections: c.connections}
		got, err := f.httpVersion(c.url)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%+v: %q, %v; want %q", c, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v: error %v, want one saying %q", c, err, c.err)
		}
	}
}
