// Package sse reads a text/event-stream (server-sent events) by the WHATWG
// rules, for both the probe's hot loop and the agent client: LF, CRLF or CR
// line ends, comment lines starting with ':', "field:value" with one
// optional space after the colon, data lines joined with '\n', an event
// dispatched at a blank line, a leading BOM ignored, an id containing NUL
// ignored, and an event cut off by the end of the stream discarded.
//
// Why not a library such as r3labs/sse/v2: its client only sends GET (a
// completion is a POST), it splits events with a bufio.Scanner capped at 64
// KiB by default, its field parser is unexported, and its subscribe loop
// leaks goroutines and retries after errors. What is needed is small: parse
// over a bufio.Reader on byte slices, reuse every buffer, read from the
// source only when nothing is buffered (so the caller can tell which read
// delivered each event), and bound one event so a hostile or broken stream
// cannot make it allocate without bound: memory stays within about twice
// the limit.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLimit is the largest event limit a Reader takes: far above any real
// event, and small enough that sums of sizes cannot wrap.
const MaxLimit = 1 << 30

// DefaultLimit is the event limit of a Reader made with limit <= 0.
const DefaultLimit = 1 << 20

// ErrTooLarge matches (errors.Is) every *TooLargeError.
var ErrTooLarge = errors.New("event too large")

// TooLargeError is returned when one event exceeds the reader's limit.
// Only the stream being read fails.
type TooLargeError struct{ Limit int }

func (e *TooLargeError) Error() string { return fmt.Sprintf("event exceeds %d bytes", e.Limit) }

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Event is one dispatched event. Its slices stay valid only until the next
// call to Next.
type Event struct {
	Data []byte // the data lines joined with '\n'
	Type []byte // the event type; empty means "message"
	ID   []byte // the last event id as of this event
	// HasID reports whether the stream has set an id (possibly empty).
	HasID bool
}

// lineSlack lets a raw line exceed the limit by its field name ("data: "):
// the limit applies exactly to the event's data, checked in field.
const lineSlack = 64

// utf8BOM may start a stream; it is not part of the first line.
const utf8BOM = "\xef\xbb\xbf"

// Reader yields the events of one stream.
type Reader struct {
	br    *bufio.Reader
	limit int

	line    []byte // a line that spans buffer refills
	data    []byte // data buffer of the event being read
	typ     []byte
	id      []byte
	hasID   bool
	ev      Event
	started bool // the BOM check is done
	skipLF  bool // the previous line ended in CR: a following LF belongs to it
	reset   bool // the last returned event's buffers can be reused
	crPos   int  // unread offset of the next CR, or -1 when not known
	crEnd   int  // unread bytes before this offset hold no CR except at crPos
}

// NewReader reads events from br. limit bounds one event's data; <= 0
// means DefaultLimit, and it is at most MaxLimit.
func NewReader(br *bufio.Reader, limit int) *Reader {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Reader{br: br, limit: min(limit, MaxLimit), crPos: -1}
}

// Next returns the next event, io.EOF at the end of the stream (a partial
// event there is discarded), a *TooLargeError, or the read error. It reads
// from the source only when nothing is buffered, so the last read before
// it returns delivered the event's last byte.
func (r *Reader) Next() (*Event, error) {
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
			r.reset = true
			return r.dispatch(r.data[:len(r.data)-1]), nil
		}
		if err := r.field(line); err != nil {
			return nil, err
		}
	}
}

// dispatch returns the event with data, the current type and id.
func (r *Reader) dispatch(data []byte) *Event {
	r.ev = Event{Data: data, Type: r.typ, ID: r.id, HasID: r.hasID}
	return &r.ev
}

// wholeEvent is the fast path for the usual event, one data line and a
// blank line ("data: {...}\n\n") already in the buffer: one search for the
// line end instead of a buffer peek per line, and the data handed out in
// place instead of copied. It returns nil, consuming nothing, for anything
// else (other fields, comments, CR line ends, an event not yet complete in
// the buffer, an event over the limit), which the line-by-line path handles.
func (r *Reader) wholeEvent() *Event {
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
	return r.dispatch(value)
}

// field applies one non-blank line to the event being built.
func (r *Reader) field(line []byte) error {
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
			return &TooLargeError{r.limit}
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	case "event":
		r.typ = append(r.typ[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id = append(r.id[:0], value...)
			r.hasID = true
		}
	}
	// "retry" and unknown fields are ignored.
	return nil
}

// readLine returns the next line without its terminator. The slice points
// into the bufio buffer or r.line and is valid until the next read.
func (r *Reader) readLine() ([]byte, error) {
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
				return nil, &TooLargeError{r.limit}
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
				return nil, &TooLargeError{r.limit}
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
func (r *Reader) lineEnd(buf []byte) int {
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
func (r *Reader) consume(n int) {
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

// BufferCaps reports the capacities of the reader's line and data buffers,
// so a test can check they stay within the bound the limit sets.
func (r *Reader) BufferCaps() (line, data int) { return cap(r.line), cap(r.data) }
