package probe

import (
	"net"
	"sync/atomic"
	"time"
)

// Arrival times from the kernel. A stream event's arrival is when its bytes
// reached this host, and the kernel notes that on each packet it receives.
// time.Now after a read instead adds however long the Go scheduler took to
// run the reading goroutine: little on an idle host, milliseconds when
// thousands of streams share two cores (the netpoller is then polled only
// between other goroutines' work). Where the kernel can (Linux, TCP), the
// probe's connections ask it for a receive time with every read
// (SO_TIMESTAMPNS) and the probe stamps headers and events with it.

// arrivalConn is a connection that knows when the bytes of its latest read
// reached the host.
type arrivalConn interface {
	// lastArrival is the kernel's receive time of the latest read's bytes
	// in Unix nanoseconds, 0 when that read brought none.
	lastArrival() int64
}

// arrivalStamps is what an arrivalConn keeps: the latest read's receive
// time, written by the goroutine reading and read by the one stamping.
type arrivalStamps struct {
	latest atomic.Int64
}

func (s *arrivalStamps) lastArrival() int64 { return s.latest.Load() }

// maxArrivalLag is the oldest a kernel receive time may be, against the
// read that returned it, and still be used: older means the wall clock was
// stepped between the two, and time.Now is used instead.
const maxArrivalLag = 10 * time.Second

// arrivalOf returns when the bytes c's latest read brought reached the
// host, on now's monotonic clock: the kernel's receive time where c has
// one, else now. It is never after now: a byte cannot be read before it
// arrives, and a read may return bytes an earlier read brought in, whose
// arrival was earlier still, so the kernel's time of the latest read is
// between the true arrival and now.
func arrivalOf(c net.Conn, now time.Time) time.Time {
	at, _ := kernelArrival(c, now)
	return at
}

// kernelArrival is arrivalOf, and whether the time is the kernel's.
func kernelArrival(c net.Conn, now time.Time) (time.Time, bool) {
	ac, ok := c.(arrivalConn)
	if !ok {
		return now, false
	}
	ns := ac.lastArrival()
	if ns == 0 {
		return now, false
	}
	lag := time.Duration(now.UnixNano() - ns)
	if lag < 0 || lag > maxArrivalLag {
		return now, false
	}
	return now.Add(-lag), true
}

// unwrapConn returns the TCP-level connection under c: the probe's own,
// under TLS where c is a TLS connection.
func unwrapConn(c net.Conn) net.Conn {
	if u, ok := c.(interface{ NetConn() net.Conn }); ok {
		return u.NetConn()
	}
	return c
}
