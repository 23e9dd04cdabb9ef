package probe

// A server-sent events reader written for the probe's hot loop.
//
// Why not a library such as r3labs/sse/v2: its client only sends GET (a
// completion is a POST), it splits events with a bufio.Scanner capped at 64
// KiB by default, its field parser is unexported, and its subscribe loop
// leaks goroutines and retries (re-POSTing a new generation) after errors. What we need is small: parse the WHATWG
// event-stream format over a bufio.Reader on byte slices, reuse every buffer,
// and tell the caller which socket read delivered each event.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultMaxEventBytes bounds one stream event (SSE event or NDJSON line).
const DefaultMaxEventBytes = 1 << 20

// streamBufferBytes is the bufio buffer size. It is large enough that one
// socket read can bring many events, so coalescing is visible.
const streamBufferBytes = 32 << 10

// eventTooLargeError is returned when one event exceeds the reader's limit.
// Only the request being read fails.
type eventTooLargeError struct{ limit int }

func (e *eventTooLargeError) Error() string {
	return fmt.Sprintf("event exceeds %d bytes", e.limit)
}

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
// so an event's arrival time is when its bytes reached the process, not when
// the parser got round to it.
type readClock struct {
	r     io.Reader
	reads uint64
	bytes int64
	at    time.Time
}

func (c *readClock) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.at = time.Now()
		c.reads++
		c.bytes += int64(n)
	}
	return n, err
}

// lineSlack lets a raw line exceed the limit by its field name ("data: "):
// the limit applies exactly to the event's data, checked in field.
const lineSlack = 64

// utf8BOM may start a stream; it is not part of the first line.
const utf8BOM = "\xef\xbb\xbf"

// sseReader parses text/event-stream per the WHATWG rules: LF, CRLF or CR
// line ends, comment lines starting with ':', "field:value" with one optional
// space after the colon, data lines joined with '\n', an event dispatched at
// a blank line, and a leading BOM ignored. An event cut off by the end of the
// stream is discarded, as the standard says.
type sseReader struct {
	br    *bufio.Reader
	clock *readClock
	limit int

	line    []byte // a line that spans buffer refills
	data    []byte // data buffer of the event being read
	typ     []byte
	id      []byte
	ev      streamEvent
	started bool // the BOM check is done
	skipLF  bool // the previous line ended in CR: a following LF belongs to it
	reset   bool // the last returned event's buffers can be reused
	crPos   int  // unread offset of the next CR, or -1 when not known
	crEnd   int  // unread bytes before this offset hold no CR except at crPos
}

// newSSEReader reads events from br, whose source is clock. limit <= 0 means
// DefaultMaxEventBytes.
func newSSEReader(br *bufio.Reader, clock *readClock, limit int) *sseReader {
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	limit = min(limit, MaxEventBytesLimit) // sizes plus the limit must not wrap
	return &sseReader{br: br, clock: clock, limit: limit, crPos: -1}
}

// Next returns the next event, io.EOF at the end of the stream, or an error.
func (r *sseReader) Next() (*streamEvent, error) {
	if r.reset {
		r.data = r.data[:0]
		r.typ = r.typ[:0]
		r.reset = false
	}
	if r.started && !r.skipLF {
		if ev := r.wholeEvent(); ev != nil {
			return ev, nil
		}
	}
	for {
		line, err := r.readLine()
		if err != nil {
			return nil, err
		}
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte(utf8BOM))
		}
		if len(line) == 0 {
			if len(r.data) == 0 {
				// Nothing to dispatch (comments or bare fields only).
				r.typ = r.typ[:0]
				continue
			}
			r.ev.Data = r.data[:len(r.data)-1]
			r.ev.Type = r.typ
			r.ev.ID = r.id
			r.ev.Read = r.clock.reads
			r.ev.At = r.clock.at
			r.reset = true
			return &r.ev, nil
		}
		if err := r.field(line); err != nil {
			return nil, err
		}
	}
}

// wholeEvent is the fast path for the usual event, one data line and a
// blank line ("data: {...}\n\n") already in the buffer: one search for the
// line end instead of a buffer peek per line, and the data handed out in
// place instead of copied. It returns nil, consuming nothing, for anything
// else (other fields, comments, CR line ends, an event not yet complete in
// the buffer, an event over the limit), which the line-by-line path handles.
func (r *sseReader) wholeEvent() *streamEvent {
	n := r.br.Buffered()
	if n < len("data:\n\n") {
		return nil
	}
	buf, _ := r.br.Peek(n)
	if string(buf[:5]) != "data:" {
		return nil
	}
	end := r.lineEnd(buf)
	if end < 0 || end+1 >= len(buf) || buf[end] != '\n' || buf[end+1] != '\n' {
		return nil
	}
	value := buf[5:end]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	if len(value)+1 > r.limit {
		return nil
	}
	// Discard only moves the read position: value's bytes stay in place
	// until the next fill, which the next call to Next may do.
	r.consume(end + 2)
	r.ev.Data = value
	r.ev.Type = r.typ
	r.ev.ID = r.id
	r.ev.Read = r.clock.reads
	r.ev.At = r.clock.at
	return &r.ev
}

// field applies one non-blank line to the event being built.
func (r *sseReader) field(line []byte) error {
	colon := bytes.IndexByte(line, ':')
	if colon == 0 {
		return nil // comment
	}
	name, value := line, []byte(nil)
	if colon > 0 {
		name, value = line[:colon], line[colon+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if len(r.data)+len(value)+1 > r.limit {
			return &eventTooLargeError{r.limit}
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	case "event":
		r.typ = append(r.typ[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id = append(r.id[:0], value...)
		}
	}
	// "retry" and unknown fields are ignored.
	return nil
}

// readLine returns the next line without its terminator. The slice points
// into the bufio buffer or r.line and is valid until the next read.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		buf, err := buffered(r.br)
		if len(buf) == 0 {
			if errors.Is(err, io.EOF) {
				// A partial line or event at the end is discarded.
				return nil, io.EOF
			}
			return nil, err
		}
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.consume(1)
				continue
			}
		}
		i := r.lineEnd(buf)
		if i < 0 {
			if len(r.line)+len(buf)+len(r.data) > r.limit+lineSlack {
				return nil, &eventTooLargeError{r.limit}
			}
			r.line = append(r.line, buf...)
			r.consume(len(buf))
			continue
		}
		n := i + 1
		if buf[i] == '\r' {
			switch {
			case i+1 == len(buf):
				r.skipLF = true // the LF, if any, is not here yet
			case buf[i+1] == '\n':
				n++
			}
		}
		line := buf[:i]
		if len(r.line) > 0 {
			if len(r.line)+len(line)+len(r.data) > r.limit+lineSlack {
				return nil, &eventTooLargeError{r.limit}
			}
			r.line = append(r.line, line...)
			line = r.line
		}
		// Discard only moves the read position: line's bytes stay in place
		// until the next fill.
		r.consume(n)
		return line, nil
	}
}

// lineEnd returns the index of the first CR or LF in buf (the unread
// bytes), or -1. Most streams never send a CR, so instead of searching
// each line for one, it searches all buffered bytes once and remembers
// where the next CR is (crPos) or how far there is none (crEnd).
func (r *sseReader) lineEnd(buf []byte) int {
	lf := bytes.IndexByte(buf, '\n')
	upTo := lf
	if lf < 0 {
		upTo = len(buf)
	}
	if r.crPos < 0 && r.crEnd < upTo {
		if j := bytes.IndexByte(buf[r.crEnd:], '\r'); j < 0 {
			r.crEnd = len(buf)
		} else {
			r.crPos = r.crEnd + j
			r.crEnd = r.crPos + 1
		}
	}
	if r.crPos >= 0 && (lf < 0 || r.crPos < lf) {
		return r.crPos
	}
	return lf
}

// consume discards n unread bytes and shifts the CR bookkeeping with them.
func (r *sseReader) consume(n int) {
	_, _ = r.br.Discard(n)
	r.crEnd = max(r.crEnd-n, 0)
	if r.crPos >= 0 {
		r.crPos -= n
		if r.crPos < 0 {
			r.crPos, r.crEnd = -1, 0
		}
	}
}

// buffered returns the bytes br holds, reading once from the source when it
// holds none. It blocks only when nothing is buffered.
func buffered(br *bufio.Reader) ([]byte, error) {
	n := br.Buffered()
	if n == 0 {
		if _, err := br.Peek(1); err != nil && br.Buffered() == 0 {
			return nil, err
		}
		n = br.Buffered()
	}
	b, _ := br.Peek(n)
	return b, nil
}
