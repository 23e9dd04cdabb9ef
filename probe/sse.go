package probe

// The probe's stream events: SSE (internal/sse, shared with the agent
// client) or NDJSON (ndjson.go), each stamped with the socket read that
// delivered it.

import (
	"bufio"
	"io"
	"net"
	"time"

	"github.com/latscope/latscope/internal/sse"
)

// DefaultMaxEventBytes bounds one stream event (SSE event or NDJSON line).
const DefaultMaxEventBytes = 1 << 20

// streamBufferBytes is the bufio buffer size, one a stream. It is large
// enough that one read can bring many events (a token's event is 100 to
// 300 bytes), so coalescing is visible. net/http reads the connection
// through a 4 KB buffer of its own, so more is memory for nothing: at
// 10,000 streams, 8 KB held 40 MB more of the heap than 4 KB.
const streamBufferBytes = 4 << 10

// eventTooLargeError is returned when one event exceeds the reader's limit
// (SSE or NDJSON). Only the request being read fails.
type eventTooLargeError = sse.TooLargeError

// streamEvent is one event of a response stream. Its slices stay valid only
// until the next call to Next.
type streamEvent struct {
	Data []byte // the event's data (SSE: data lines joined with \n; NDJSON: the line)
	Type []byte // SSE event type ("" means "message"); nil for NDJSON
	ID   []byte // SSE last event id; nil for NDJSON

	// Read is the sequence number of the socket read that delivered the
	// event's last byte; events sharing it arrived coalesced.
	Read uint64
	// At is when that read returned: the event's arrival time.
	At time.Time
}

// eventReader yields the events of one response body.
type eventReader interface {
	Next() (*streamEvent, error)
}

// readClock wraps a response body and stamps every read that returns data,
// so an event's arrival time is when its bytes reached the host (the
// kernel's receive time where conn keeps it, see arrival.go), or at least
// the process, not when the parser got round to it.
type readClock struct {
	r     io.Reader
	conn  net.Conn    // the connection under r; nil: stamp with time.Now
	lag   *lagRequest // told of each read (nil: nobody)
	reads uint64
	bytes int64
	at    time.Time // the latest read's; never goes back
}

func (c *readClock) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		now := time.Now()
		at, stamped := kernelArrival(c.conn, now)
		c.lag.read(at, now, stamped)
		if at.After(c.at) {
			c.at = at
		}
		c.reads++
		c.bytes += int64(n)
	}
	return n, err
}

// sseReader reads the events of an SSE body with the shared WHATWG reader
// (internal/sse) and stamps each with the socket read that delivered it.
// The shared reader reads from the source only when nothing is buffered,
// so the clock's latest read is the one that brought the event's last byte.
type sseReader struct {
	r     *sse.Reader
	clock *readClock
	ev    streamEvent
}

// newSSEReader reads events from br, whose source is clock. limit <= 0 means
// DefaultMaxEventBytes.
func newSSEReader(br *bufio.Reader, clock *readClock, limit int) *sseReader {
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	return &sseReader{r: sse.NewReader(br, min(limit, MaxEventBytesLimit)), clock: clock}
}

// Next returns the next event, io.EOF at the end of the stream, or an error.
func (r *sseReader) Next() (*streamEvent, error) {
	ev, err := r.r.Next()
	if err != nil {
		return nil, err
	}
	r.ev = streamEvent{Data: ev.Data, Type: ev.Type, ID: ev.ID, Read: r.clock.reads, At: r.clock.at}
	return &r.ev, nil
}
