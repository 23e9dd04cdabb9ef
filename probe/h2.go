package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latscope/latscope/event"
)

// HTTP/2 for the probe. H2Transport sends each request as a stream on one
// of a fixed number of HTTP/2 connections, taken in turn, so that a load
// of C streams over N connections is what the server sees. It is built on
// net/http's own HTTP/2 client connections (http.Transport.NewClientConn)
// and reads the frames where they cross the connection (h2frames.go).
//
// Per stream the probe keeps the stages it times on HTTP/1.1: the stream
// that opens a connection pays its TCP connect and TLS handshake, the
// streams after it on that connection find it open (reused, no connect);
// then request written, response headers, first content. Beside them the
// frames give the stream's id, its connection, its first DATA frame, the
// longest gap between its DATA frames, and its flow-control stalls.
//
// Arrival times: a stream's events are stamped with the kernel's receive
// time of the latest connection read that carried a frame of that stream
// (HTTP/1.1: of the latest read of the stream's own connection). One read
// of a shared connection may carry the frames of several streams, and the
// client's read loop may have read later frames before the stream's reader
// runs, so the stamp can be later than the frame's own arrival by up to
// one read's worth of other streams' frames; it is never earlier.

// H2Config configures an H2Transport.
type H2Config struct {
	// TLS: nil speaks HTTP/2 without TLS to a server known to speak it
	// (h2c, prior knowledge); else TLS with ALPN offering h2 alone.
	TLS *tls.Config
	// H2C must be true when TLS is nil, so that plain HTTP/2 is asked for.
	H2C bool
	// Connections is how many connections the streams are spread over
	// (each opened when its first stream needs it); 0 means 1.
	Connections int
}

// H2Stats counts what an H2Transport did.
type H2Stats struct {
	// Connections counts the connections opened (TCP connect, TLS, and
	// the HTTP/2 preface and settings), reopenings after a GOAWAY or a
	// close included.
	Connections int64
	// GoAwayRetries counts requests sent again on a new connection because
	// the server had sent GOAWAY (or closed) before taking their stream.
	GoAwayRetries int64
}

// MaxH2Connections bounds H2Config.Connections.
const MaxH2Connections = 1024

// H2Transport is the probe's HTTP/2 transport (see above). It is safe for
// concurrent use.
type H2Transport struct {
	tr      *http.Transport
	tls     *tls.Config
	slots   []h2Slot
	next    atomic.Uint64
	opened  atomic.Int64
	retries atomic.Int64
}

// h2Slot is one of the connections: the current one, and the dial under
// way when there is one.
type h2Slot struct {
	mu      sync.Mutex
	conn    *h2Conn
	dialing chan struct{} // closed when the dial under way ends
	old     []*h2Conn     // replaced connections, closed when idle
}

// h2Conn is one HTTP/2 connection.
type h2Conn struct {
	cc    *http.ClientConn
	sniff *sniffConn
}

// usable reports whether c may take a new stream: open, and no GOAWAY.
func (c *h2Conn) usable() bool {
	if c.cc.Err() != nil {
		return false
	}
	away, _ := c.sniff.goingAway()
	return !away
}

// NewH2Transport returns an H2Transport for cfg.
func NewH2Transport(cfg H2Config) (*H2Transport, error) {
	n := cfg.Connections
	switch {
	case n < 0 || n > MaxH2Connections:
		return nil, fmt.Errorf("connections %d: want 1 to %d", n, MaxH2Connections)
	case n == 0:
		n = 1
	}
	if cfg.TLS == nil && !cfg.H2C {
		return nil, errors.New("HTTP/2 without TLS is h2c: say so (H2C)")
	}
	t := &H2Transport{slots: make([]h2Slot, n)}
	if cfg.TLS != nil {
		t.tls = cfg.TLS.Clone()
		t.tls.NextProtos = []string{"h2"}
	}
	// The connections are HTTP/2 from their first byte: the transport is
	// told so (unencrypted HTTP/2 alone), and the dial does any TLS itself,
	// so that the frames can be read above it.
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	t.tr = &http.Transport{
		DialContext:        t.dial,
		Protocols:          &protos,
		DisableCompression: true,
		HTTP2:              &http.HTTP2Config{SendPingTimeout: 15 * time.Second},
	}
	return t, nil
}

// NewH2Client returns an http.Client on a new H2Transport, with the
// probe's redirect policy.
func NewH2Client(cfg H2Config) (*http.Client, error) {
	t, err := NewH2Transport(cfg)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: t, CheckRedirect: CheckRedirect}, nil
}

// Stats returns the counts so far.
func (t *H2Transport) Stats() H2Stats {
	return H2Stats{Connections: t.opened.Load(), GoAwayRetries: t.retries.Load()}
}

// HTTP2Stats returns what the client's HTTP/2 transport did, and false
// when the client speaks HTTP/1.1.
func (c *Client) HTTP2Stats() (H2Stats, bool) {
	if t, ok := c.hc.Transport.(*H2Transport); ok {
		return t.Stats(), true
	}
	return H2Stats{}, false
}

// h2Statser is a Doer that may speak HTTP/2 (the Client).
type h2Statser interface {
	HTTP2Stats() (H2Stats, bool)
}

// h2DialKey is the context key under which a dial leaves its connection.
type h2DialKey struct{}

// dial opens one connection for http.Transport.NewClientConn: TCP (with
// receive times), then TLS with ALPN h2 where asked, with the request's
// trace told of the handshake; the frames are read above it.
func (t *H2Transport) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := stampingDialer(newDialer())(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := raw
	if t.tls != nil {
		if c, err = t.handshake(ctx, raw, addr); err != nil {
			_ = raw.Close()
			return nil, err
		}
	}
	sc := newSniffConn(c, raw, int(t.opened.Add(1)))
	if out, ok := ctx.Value(h2DialKey{}).(**sniffConn); ok {
		*out = sc
	}
	return sc, nil
}

// handshake runs TLS on raw, insisting on h2.
func (t *H2Transport) handshake(ctx context.Context, raw net.Conn, addr string) (net.Conn, error) {
	cfg := t.tls.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.TLSHandshakeStart != nil {
		trace.TLSHandshakeStart()
	}
	tc := tls.Client(raw, cfg)
	err := tc.HandshakeContext(ctx)
	state := tc.ConnectionState()
	if trace != nil && trace.TLSHandshakeDone != nil {
		trace.TLSHandshakeDone(state, err)
	}
	if err != nil {
		return nil, err
	}
	if state.NegotiatedProtocol != "h2" {
		return nil, errors.New("the server did not take HTTP/2 in the TLS handshake (ALPN); it speaks HTTP/1.1 only there: drop --http2")
	}
	return tc, nil
}

// RoundTrip sends req as a stream on the next connection in turn, opening
// it first where it is not open (or went away). A request that a GOAWAY or
// a close kept from being taken is sent once more on a new connection.
func (t *H2Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	slot := &t.slots[(t.next.Add(1)-1)%uint64(len(t.slots))]
	resp, retry, err := t.attempt(slot, req, false)
	if !retry || req.Context().Err() != nil {
		return resp, err
	}
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	t.retries.Add(1)
	resp, _, err = t.attempt(slot, again, true)
	return resp, err
}

// attempt sends req once on slot's connection. retry says the server
// never took the stream, so it may be sent again.
func (t *H2Transport) attempt(slot *h2Slot, req *http.Request, again bool) (resp *http.Response, retry bool, err error) {
	c, reused, err := t.conn(req.Context(), slot, req)
	if err != nil {
		return nil, false, err
	}
	sc := &h2StreamConn{sniffConn: c.sniff, again: again}
	trace := httptrace.ContextClientTrace(req.Context())
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: sc, Reused: reused})
	}
	claimed := make(chan struct{})
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteHeaders: func() {
			sc.stream.Store(c.sniff.claimLatest())
			close(claimed)
		},
	})
	resp, err = c.cc.RoundTrip(req.WithContext(ctx))
	if err == nil {
		// net/http reports the headers written from the goroutine that
		// wrote them, which can run after the answer came: wait for it, so
		// the stream is known before its answer is read.
		select {
		case <-claimed:
		case <-req.Context().Done():
		}
		return resp, false, nil
	}
	// Not taken: the stream was never written, or the GOAWAY's last stream
	// is below it; a connection that closed before writing it is the same.
	st := sc.stream.Load()
	away, last := c.sniff.goingAway()
	notTaken := st == nil && (away || c.cc.Err() != nil) || st != nil && away && st.id > last
	return nil, notTaken, err
}

// conn returns slot's connection, opening one where there is none that can
// take a stream; reused is false for the request that opened it.
func (t *H2Transport) conn(ctx context.Context, slot *h2Slot, req *http.Request) (c *h2Conn, reused bool, err error) {
	for {
		slot.mu.Lock()
		if slot.conn != nil && slot.conn.usable() {
			c = slot.conn
			slot.mu.Unlock()
			return c, true, nil
		}
		if slot.dialing == nil {
			done := make(chan struct{})
			slot.dialing = done
			if slot.conn != nil {
				slot.old = append(slot.old, slot.conn)
				slot.conn = nil
			}
			slot.closeIdleOld()
			slot.mu.Unlock()
			c, err = t.open(ctx, req)
			slot.mu.Lock()
			slot.conn, slot.dialing = c, nil
			close(done)
			slot.mu.Unlock()
			return c, false, err
		}
		wait := slot.dialing
		slot.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, false, context.Cause(ctx)
		}
	}
}

// open dials a new HTTP/2 connection to req's host.
func (t *H2Transport) open(ctx context.Context, req *http.Request) (*h2Conn, error) {
	var sc *sniffConn
	cc, err := t.tr.NewClientConn(context.WithValue(ctx, h2DialKey{}, &sc), "http", hostPort(req))
	if err != nil {
		return nil, err
	}
	if sc == nil {
		_ = cc.Close()
		return nil, errors.New("HTTP/2 connection opened without the probe's dial")
	}
	return &h2Conn{cc: cc, sniff: sc}, nil
}

// hostPort is req's host with its port, the scheme's default where none.
func hostPort(req *http.Request) string {
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}

// closeIdleOld closes the replaced connections with no stream left, and
// forgets the closed ones. slot.mu is held.
func (slot *h2Slot) closeIdleOld() {
	kept := slot.old[:0]
	for _, c := range slot.old {
		if c.cc.Err() == nil && c.cc.InFlight() > 0 {
			kept = append(kept, c)
			continue
		}
		_ = c.cc.Close()
	}
	clear(slot.old[len(kept):])
	slot.old = kept
}

// CloseIdleConnections closes the connections that carry no stream.
func (t *H2Transport) CloseIdleConnections() {
	for i := range t.slots {
		slot := &t.slots[i]
		slot.mu.Lock()
		if slot.conn != nil && slot.conn.cc.InFlight() == 0 {
			slot.old = append(slot.old, slot.conn)
			slot.conn = nil
		}
		slot.closeIdleOld()
		slot.mu.Unlock()
	}
}

// h2StreamConn is the connection a stream's trace is given (GotConn): its
// arrival times are those of its own stream's frames (see above), and it
// holds the stream's figures once its headers went out.
type h2StreamConn struct {
	*sniffConn
	stream atomic.Pointer[h2Stream]
	again  bool // the request's second attempt, after a GOAWAY
}

// lastArrival is the arrival of the stream's latest frame, or 0 (now)
// before the first.
func (c *h2StreamConn) lastArrival() int64 {
	if st := c.stream.Load(); st != nil {
		return st.latest.Load()
	}
	return 0
}

// wrote is when the stream's request was written whole, from its frames:
// net/http reports it (httptrace WroteRequest) from the goroutine that
// wrote it, which can come after the response headers; zero before.
func (c *h2StreamConn) wrote() time.Time {
	if st := c.stream.Load(); st != nil {
		return c.wroteAll(st)
	}
	return time.Time{}
}

// h2Wrote is when a stream's request was written whole: from its frames
// (frames), else as net/http said (traced), else, the answer having come
// first, now: the write stage then runs until the answer.
func h2Wrote(frames, traced time.Time) time.Time {
	switch {
	case !frames.IsZero():
		return frames
	case !traced.IsZero():
		return traced
	}
	return time.Now()
}

// tcpConn is the TCP-level connection under c: an HTTP/2 stream's
// connection's, else c.
func tcpConn(c net.Conn) net.Conn {
	if sc, ok := c.(*h2StreamConn); ok {
		return sc.raw
	}
	return c
}

// record returns the stream's figures for its request, which started at
// start and (content) had its first content at firstAt from start. The
// first DATA frame came no later than the first content; the two stamps
// convert the kernel's wall-clock times at different moments, so a
// nanosecond's drift between the clocks could otherwise say it did.
func (c *h2StreamConn) record(start time.Time, firstAt time.Duration, content bool) *event.HTTP2Stream {
	st := c.stream.Load()
	if st == nil {
		return &event.HTTP2Stream{Conn: c.serial, GoAwayRetry: c.again}
	}
	f := c.snapshot(st)
	r := &event.HTTP2Stream{
		Conn: c.serial, Stream: f.id, DataFrames: f.frames, MaxFrameGap: f.maxGap,
		SendStalls: f.sendStalls, SendStallWait: f.sendWait, RecvStalls: f.recvStalls, RecvStallWait: f.recvWait,
		GoAwayRetry: c.again,
	}
	if !f.firstData.IsZero() {
		r.FirstData = max(f.firstData.Sub(start), 0)
		if content {
			r.FirstData = min(r.FirstData, firstAt)
		}
	}
	return r
}
