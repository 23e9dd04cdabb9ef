package probe

import (
	"crypto/tls"
	"net"
	"net/http/httptrace"
	"sync"
	"time"
)

// connTrace records the connection phases of one request through
// net/http/httptrace. The transport may call the dial hooks from its own
// goroutine (and keep dialing after the request took another, idle
// connection), so every field is behind a mutex.
type connTrace struct {
	mu           sync.Mutex
	dnsStart     time.Time
	dnsDone      time.Time
	connectStart time.Time
	connectDone  time.Time
	tlsStart     time.Time
	tlsDone      time.Time
	gotConn      time.Time
	wrote        time.Time
	reused       bool
	conn         net.Conn // the TCP-level connection the request went out on
}

// clientTrace returns the hooks that fill t.
func (t *connTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { t.setOnce(&t.dnsStart) },
		DNSDone:  func(httptrace.DNSDoneInfo) { t.set(&t.dnsDone) },
		// With several addresses the dialer may race them: the handshake
		// that counts is the first one to finish without error.
		ConnectStart: func(string, string) { t.setOnce(&t.connectStart) },
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				t.setOnce(&t.connectDone)
			}
		},
		TLSHandshakeStart: func() { t.setOnce(&t.tlsStart) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err == nil {
				t.setOnce(&t.tlsDone)
			}
		},
		GotConn: func(info httptrace.GotConnInfo) {
			now := time.Now()
			t.mu.Lock()
			t.gotConn = now
			t.reused = info.Reused
			t.conn = unwrapConn(info.Conn)
			t.mu.Unlock()
		},
		WroteRequest: func(httptrace.WroteRequestInfo) { t.set(&t.wrote) },
	}
}

func (t *connTrace) set(dst *time.Time) {
	now := time.Now()
	t.mu.Lock()
	*dst = now
	t.mu.Unlock()
}

func (t *connTrace) setOnce(dst *time.Time) {
	now := time.Now()
	t.mu.Lock()
	if dst.IsZero() {
		*dst = now
	}
	t.mu.Unlock()
}

// phases is a consistent copy of the trace, taken once the request has its
// response (or has failed).
type phases struct {
	dns, connect, tls time.Duration // zero when not done for this request
	gotConn, wrote    time.Time
	reused            bool
	conn              net.Conn // nil before one was got
}

func (t *connTrace) snapshot() phases {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := phases{gotConn: t.gotConn, wrote: t.wrote, reused: t.reused, conn: t.conn}
	if t.reused || t.gotConn.IsZero() {
		return p
	}
	p.dns = span(t.dnsStart, t.dnsDone)
	p.connect = span(t.connectStart, t.connectDone)
	p.tls = span(t.tlsStart, t.tlsDone)
	return p
}

// span is b-a, or zero when either is missing or they are out of order.
func span(a, b time.Time) time.Duration {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0
	}
	return b.Sub(a)
}
