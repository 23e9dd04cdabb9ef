package sim

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Network is the distance between the simulator and its clients: every
// byte a client sends arrives RTT/2 later, and every byte the simulator
// writes leaves RTT/2 later, each one way drawn within ±Jitter. Frames
// pipeline (a frame does not wait for the previous one's trip) and never
// overtake each other, as on one TCP connection. The TCP handshake itself
// is the kernel's and is not delayed: a client's connect time stays the
// loopback's.
type Network struct {
	RTT    time.Duration
	Jitter time.Duration
	Seed   int64 // seeds the jitter draws
	// Late, when set, adds up how late the trips arrived past their
	// due time: on a host too busy to keep pace the distance is longer
	// than asked, and a test judges the measurement against that truth.
	Late *Lateness
}

// Lateness is how late a network's trips arrived past their due time, in
// all; safe for concurrent use.
type Lateness struct {
	late  atomic.Int64 // ns
	trips atomic.Int64
}

// add counts one trip that arrived at at, due at due.
func (l *Lateness) add(due, at time.Time) {
	if l == nil {
		return
	}
	l.late.Add(int64(max(at.Sub(due), 0)))
	l.trips.Add(1)
}

// Mean is the mean lateness of a trip (0 before any).
func (l *Lateness) Mean() time.Duration {
	n := l.trips.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(l.late.Load() / n)
}

// DefaultRTT is the simulator's default network distance: a client in the
// same region.
const DefaultRTT = time.Millisecond

// networkQueue bounds the chunks held in flight per direction of one
// connection: a writer past it waits, as on a full socket buffer.
const networkQueue = 4096

// closeFlushLimit bounds how long a closing connection waits for what it
// still has in flight.
const closeFlushLimit = 2 * time.Second

// Validate checks the network's settings.
func (n Network) Validate() error {
	if n.RTT < 0 || n.Jitter < 0 {
		return errors.New("network rtt and jitter must not be negative")
	}
	return nil
}

// Listener wraps ln so that its connections are this far away; ln itself
// when there is no distance.
func (n Network) Listener(ln net.Listener) net.Listener {
	if n.RTT == 0 && n.Jitter == 0 {
		return ln
	}
	return &netListener{Listener: ln, n: n}
}

type netListener struct {
	net.Listener
	n   Network
	seq atomic.Uint64
}

func (l *netListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newNetConn(c, l.n, l.seq.Add(1)), nil
}

// inFlight is bytes in flight, due at their far end at due; or, with mark
// set, a marker the writer closes once everything before it has left.
type inFlight struct {
	b       []byte
	due     time.Time
	mark    chan struct{}
	counted bool // its lateness is in Network.Late
}

// netConn delays both directions of one connection. Its reader goroutine
// takes bytes from the socket as the client sends them and holds each
// read until it is due; its writer goroutine sends each write when it is
// due. Both end with the connection (Close).
type netConn struct {
	net.Conn
	n Network

	rngMu sync.Mutex
	rng   *rand.Rand

	in       chan inFlight // from the reader goroutine, in order
	readErr  error         // set before in is closed
	head     *inFlight     // owned by Read: the chunk being delivered
	dlMu     sync.Mutex
	deadline time.Time
	dlChange chan struct{} // closed and replaced when the deadline changes

	outMu    sync.Mutex
	out      chan inFlight
	lastDue  time.Time // the last write's departure: writes keep their order
	outErr   error
	closing  bool
	writerOK chan struct{} // closed when the writer goroutine has ended
	done     chan struct{} // closed by Close
	closeErr error
	once     sync.Once
}

func newNetConn(c net.Conn, n Network, seq uint64) *netConn {
	nc := &netConn{
		Conn: c, n: n, rng: rand.New(rand.NewPCG(uint64(n.Seed), seq)),
		in: make(chan inFlight, networkQueue), dlChange: make(chan struct{}),
		out: make(chan inFlight, networkQueue), writerOK: make(chan struct{}), done: make(chan struct{}),
	}
	go nc.readLoop()
	go nc.writeLoop()
	return nc
}

// oneWay draws one trip's delay.
func (c *netConn) oneWay() time.Duration {
	d := c.n.RTT / 2
	if c.n.Jitter > 0 {
		c.rngMu.Lock()
		d += time.Duration((2*c.rng.Float64() - 1) * float64(c.n.Jitter))
		c.rngMu.Unlock()
	}
	return max(d, 0)
}

func (c *netConn) readLoop() {
	defer close(c.in)
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Conn.Read(buf)
		if n > 0 {
			due := time.Now().Add(c.oneWay())
			if due.Before(last) {
				due = last
			}
			last = due
			select {
			case c.in <- inFlight{b: append([]byte(nil), buf[:n]...), due: due}:
			case <-c.done:
				return
			}
		}
		if err != nil {
			c.readErr = err
			return
		}
	}
}

// Read returns the bytes that have arrived, waiting for them to be due, or
// until the read deadline (the HTTP server moves it to wake a pending read).
func (c *netConn) Read(p []byte) (int, error) {
	for {
		c.dlMu.Lock()
		dl, changed := c.deadline, c.dlChange
		c.dlMu.Unlock()
		if !dl.IsZero() && !time.Now().Before(dl) {
			return 0, os.ErrDeadlineExceeded
		}
		var in <-chan inFlight
		wake := dl // the earlier of the deadline and the head's arrival
		if c.head == nil {
			in = c.in
		} else {
			if now := time.Now(); !now.Before(c.head.due) {
				if !c.head.counted {
					c.head.counted = true
					c.n.Late.add(c.head.due, now)
				}
				n := copy(p, c.head.b)
				if c.head.b = c.head.b[n:]; len(c.head.b) == 0 {
					c.head = nil
				}
				return n, nil
			}
			// Go's timers overshoot sub-millisecond waits by up to a
			// millisecond: sleep only the long part, spin the tail (see
			// pause).
			until := time.Until(c.head.due)
			if until < minSleepCost {
				select {
				case <-changed:
				case <-c.done:
					return 0, net.ErrClosed
				default:
					runtime.Gosched()
				}
				continue
			}
			if sleepEnd := c.head.due.Add(-spinTail); wake.IsZero() || sleepEnd.Before(wake) {
				wake = sleepEnd
			}
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if !wake.IsZero() {
			timer = time.NewTimer(time.Until(wake))
			fire = timer.C
		}
		select {
		case ch, ok := <-in:
			if !ok {
				return 0, c.readErr
			}
			c.head = &ch
		case <-fire:
		case <-changed:
		case <-c.done:
			return 0, net.ErrClosed
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// SetReadDeadline sets the deadline of Read (not of the socket's reads,
// which go on in the background).
func (c *netConn) SetReadDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.deadline = t
	close(c.dlChange)
	c.dlChange = make(chan struct{})
	return nil
}

// SetDeadline sets both deadlines.
func (c *netConn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

// Write queues p to leave when due; it fails once a send has failed.
func (c *netConn) Write(p []byte) (int, error) {
	c.outMu.Lock()
	if c.outErr != nil || c.closing {
		defer c.outMu.Unlock()
		return 0, errors.Join(net.ErrClosed, c.outErr)
	}
	due := time.Now().Add(c.oneWay())
	if due.Before(c.lastDue) {
		due = c.lastDue
	}
	c.lastDue = due
	c.outMu.Unlock()
	select {
	case c.out <- inFlight{b: append([]byte(nil), p...), due: due}:
		return len(p), nil
	case <-c.done:
		return 0, net.ErrClosed
	}
}

func (c *netConn) writeLoop() {
	defer close(c.writerOK)
	for {
		var ch inFlight
		select {
		case ch = <-c.out:
		case <-c.done:
			return
		}
		if ch.mark != nil {
			close(ch.mark)
			continue
		}
		if !sleepUntil(ch.due, c.done) {
			return
		}
		c.n.Late.add(ch.due, time.Now())
		if _, err := c.Conn.Write(ch.b); err != nil {
			c.outMu.Lock()
			c.outErr = err
			c.outMu.Unlock()
			return
		}
	}
}

// flush waits, within closeFlushLimit, for every queued write to leave.
func (c *netConn) flush() {
	c.outMu.Lock()
	c.closing = true
	last := c.lastDue
	c.outMu.Unlock()
	limit := time.NewTimer(time.Until(last) + closeFlushLimit)
	defer limit.Stop()
	mark := make(chan struct{})
	select {
	case c.out <- inFlight{mark: mark}:
	case <-c.writerOK:
		return
	case <-limit.C:
		return
	}
	select {
	case <-mark:
	case <-c.writerOK:
	case <-limit.C:
	}
}

// CloseWrite sends what is in flight, then a FIN.
func (c *netConn) CloseWrite() error {
	c.flush()
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.New("connection cannot half-close")
	}
	return cw.CloseWrite()
}

// SetLinger passes through.
func (c *netConn) SetLinger(sec int) error {
	tc, ok := c.Conn.(interface{ SetLinger(int) error })
	if !ok {
		return errors.New("connection has no linger setting")
	}
	return tc.SetLinger(sec)
}

// Close lets what is in flight arrive (within closeFlushLimit), then
// closes the connection and ends its goroutines.
func (c *netConn) Close() error {
	c.once.Do(func() {
		c.flush()
		close(c.done)
		c.closeErr = c.Conn.Close()
		<-c.writerOK
	})
	return c.closeErr
}

// sleepUntil waits until due as pause does, sleeping the long part and
// spinning the tail; false if stop ended the wait first.
func sleepUntil(due time.Time, stop <-chan struct{}) bool {
	for {
		wait := time.Until(due)
		if wait <= 0 {
			return true
		}
		if wait >= minSleepCost {
			t := time.NewTimer(wait - spinTail)
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
				return false
			}
			continue
		}
		select {
		case <-stop:
			return false
		default:
			runtime.Gosched()
		}
	}
}
