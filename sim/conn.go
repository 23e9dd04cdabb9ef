package sim

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DelayedACK is the receiver's delayed-ACK time that the Nagle emulation
// waits out: Linux's minimum, the 40 ms of the classic Nagle stall.
const DelayedACK = 40 * time.Millisecond

// refuseDrainTimeout bounds how long a refused connection waits for its
// client to hang up.
const refuseDrainTimeout = 2 * time.Second

// connKey is the request-context key of the request's *serverConn.
type connKey struct{}

// connListener wraps the connections Serve accepts, for the modes that live
// in the connection rather than in a request.
type connListener struct {
	net.Listener
	nagle bool
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &serverConn{Conn: c}
	if l.nagle {
		// Go turns Nagle's algorithm off on every TCP connection; a server
		// written in C leaves it on unless it asks otherwise.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(false)
		}
		sc.nagle = &nagle{conn: c, delay: DelayedACK}
	}
	return sc, nil
}

// connContext puts the connection in every request's context, so a handler
// can reach the connection-level modes.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*serverConn); ok {
		return context.WithValue(ctx, connKey{}, sc)
	}
	return ctx
}

// connOf returns the connection a request arrived on, or nil when the server
// is not run by Serve.
func connOf(ctx context.Context) *serverConn {
	sc, _ := ctx.Value(connKey{}).(*serverConn)
	return sc
}

// serverConn is one accepted connection.
type serverConn struct {
	net.Conn
	nagle *nagle // nil unless Config.Nagle
	// refuse makes the connection answer its next request by closing:
	// Config.CloseAfterStream.
	refuse atomic.Bool
}

// refuseNextRequest makes the connection close when the client sends its
// next request on it, instead of serving it. Nothing tells the client
// beforehand: no Connection: close, no FIN while the connection sits idle in
// its pool, so the request it next writes there fails before any response
// byte, as it does against llama-server.
func (c *serverConn) refuseNextRequest() { c.refuse.Store(true) }

// Read passes reads through until the connection is to refuse its next
// request; then the first bytes of that request end it.
func (c *serverConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.refuse.Load() {
		c.hangUp()
		return 0, io.EOF
	}
	return n, err
}

// hangUp sends a FIN and waits for the client to hang up too, discarding
// what it sent: closing a socket with unread data would send a reset, which
// is not what the client is meant to see.
func (c *serverConn) hangUp() {
	_ = c.CloseWrite()
	_ = c.Conn.SetReadDeadline(time.Now().Add(refuseDrainTimeout))
	_, _ = io.Copy(io.Discard, c.Conn)
}

// Write sends p, or holds it back under the Nagle emulation.
func (c *serverConn) Write(p []byte) (int, error) {
	if c.nagle != nil {
		return c.nagle.write(p)
	}
	return c.Conn.Write(p)
}

// heldUntil returns when the last write will be released by the Nagle
// emulation; zero if it went out at once.
func (c *serverConn) heldUntil() time.Time {
	if c.nagle == nil {
		return time.Time{}
	}
	return c.nagle.lastHeldUntil()
}

// CloseWrite sends what is held back, then a FIN.
func (c *serverConn) CloseWrite() error {
	if c.nagle != nil {
		c.nagle.flush()
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.New("connection cannot half-close")
	}
	return cw.CloseWrite()
}

// SetLinger passes through; with linger 0 (a reset) held data is dropped,
// as the kernel drops its send queue.
func (c *serverConn) SetLinger(sec int) error {
	if sec == 0 && c.nagle != nil {
		c.nagle.drop()
	}
	tc, ok := c.Conn.(interface{ SetLinger(int) error })
	if !ok {
		return errors.New("connection has no linger setting")
	}
	return tc.SetLinger(sec)
}

// Close sends what is held back, as the kernel does on close, then closes.
func (c *serverConn) Close() error {
	if c.nagle != nil {
		c.nagle.flush()
	}
	return c.Conn.Close()
}

// nagle emulates Nagle's algorithm meeting a receiver's delayed ACK, which
// loopback does not reproduce (Linux acknowledges at once there). A write
// goes out at once if no small segment is in flight; it is then in flight
// until the receiver acknowledges it, DelayedACK later. A write made while
// one is in flight is held back, together with any later ones, until that
// acknowledgement, then released in one piece, which is in flight in turn.
// Every write counts as a small segment: SSE frames are far below an MSS.
//
// mu guards the state; wmu keeps writes to conn in order and is never held
// while waiting for mu (lock order: mu, then wmu), so Close can give up on
// a write stuck on a client that stopped reading instead of waiting for it.
type nagle struct {
	conn  net.Conn
	delay time.Duration
	wmu   sync.Mutex

	mu       sync.Mutex
	ackAt    time.Time // when the segment in flight is acknowledged
	held     []byte
	release  *time.Timer // armed while bytes are held
	lastHeld time.Time   // release time of the last write; zero if it went out
	closed   bool        // flushed for a close: nothing more is held
	err      error       // a release failed; later writes fail with it
}

func (n *nagle) write(p []byte) (int, error) {
	n.mu.Lock()
	if n.err != nil {
		defer n.mu.Unlock()
		return 0, n.err
	}
	now := time.Now()
	if !n.closed && (len(n.held) > 0 || now.Before(n.ackAt)) {
		defer n.mu.Unlock()
		n.held = append(n.held, p...)
		if n.release == nil {
			n.release = time.AfterFunc(n.ackAt.Sub(now), n.releaseHeld)
		}
		n.lastHeld = n.ackAt
		return len(p), nil
	}
	n.lastHeld = time.Time{}
	n.ackAt = now.Add(n.delay)
	n.wmu.Lock()
	n.mu.Unlock()
	defer n.wmu.Unlock()
	return n.conn.Write(p)
}

func (n *nagle) lastHeldUntil() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastHeld
}

// releaseHeld sends the held bytes when the segment in flight is acknowledged.
func (n *nagle) releaseHeld() {
	n.mu.Lock()
	n.release = nil
	if n.closed || len(n.held) == 0 {
		n.mu.Unlock()
		return
	}
	batch := n.held
	n.held = nil
	n.ackAt = time.Now().Add(n.delay)
	n.wmu.Lock()
	n.mu.Unlock()
	_, err := n.conn.Write(batch)
	n.wmu.Unlock()
	if err != nil {
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
	}
}

// flush sends what is held back at once, with a bounded wait, and holds
// nothing from then on. If a write is stuck, it gives up: closing the
// connection unblocks that write, and the held bytes would follow it.
func (n *nagle) flush() {
	n.mu.Lock()
	n.stopLocked()
	batch, failed := n.held, n.err != nil
	n.held = nil
	n.mu.Unlock()
	if len(batch) == 0 || failed || !n.wmu.TryLock() {
		return
	}
	defer n.wmu.Unlock()
	_ = n.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = n.conn.Write(batch)
}

// drop discards what is held back.
func (n *nagle) drop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked()
	n.held = nil
}

func (n *nagle) stopLocked() {
	n.closed = true
	if n.release != nil {
		n.release.Stop()
		n.release = nil
	}
}
