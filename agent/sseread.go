package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// A small text/event-stream reader for the attach client. Why not a
// library: r3labs/sse/v2's client leaks a goroutine per unsubscribe, keeps
// retrying after its context ends while the server is down, and fails on an
// event over 64 KiB unless told otherwise; tmaxmax/go-sse's
// reader would do, but the reconnection, resume and restart logic is ours
// either way, and what is left is the parsing below, which is fuzzed here.
//
// It follows the WHATWG rules that matter here: LF, CRLF or CR line ends,
// ':' comments, "field: value" with one optional space, data lines joined
// with '\n', an event dispatched at a blank line, a leading BOM ignored, an
// id containing NUL ignored, and an event cut off by the end of the stream
// discarded. One event is bounded by a limit, so a hostile or broken stream
// cannot make it allocate without bound: memory stays within about twice
// the limit.

// errEventTooLarge is returned for an event over the reader's limit.
var errEventTooLarge = errors.New("event too large")

// sseEvent is one dispatched event. Data is valid until the next call to next.
type sseEvent struct {
	Type  string // "" means "message"
	Data  []byte
	ID    string // the last event id as of this event
	HasID bool   // the stream has set an id
}

type sseReader struct {
	br    *bufio.Reader
	limit int

	line    []byte
	data    []byte
	typ     string
	id      string
	hasID   bool
	dataSet bool // a data field was seen since the last dispatch
	started bool // the BOM check is done
	skipLF  bool // the previous line ended in CR: a following LF belongs to it
}

func newSSEReader(r io.Reader, limit int) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 32<<10), limit: limit}
}

// next returns the next event, io.EOF at the end of the stream (a partial
// event there is discarded), or the read error.
func (r *sseReader) next() (sseEvent, error) {
	r.data, r.typ, r.dataSet = r.data[:0], "", false
	for {
		line, err := r.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			if !r.dataSet {
				r.typ = "" // nothing to dispatch: comments or bare fields only
				continue
			}
			return sseEvent{Type: r.typ, Data: r.data[:len(r.data)-1], ID: r.id, HasID: r.hasID}, nil
		}
		if err := r.field(line); err != nil {
			return sseEvent{}, err
		}
	}
}

func (r *sseReader) field(line []byte) error {
	name, value, found := bytes.Cut(line, []byte(":"))
	if found && len(name) == 0 {
		return nil // comment
	}
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if len(r.data)+len(value)+1 > r.limit {
			return fmt.Errorf("%w: over %d bytes", errEventTooLarge, r.limit)
		}
		r.data = append(append(r.data, value...), '\n')
		r.dataSet = true
	case "event":
		r.typ = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id, r.hasID = string(value), true
		}
	}
	// "retry" and unknown fields are ignored.
	return nil
}

// readLine returns the next line without its end. The slice is valid until
// the next call.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.skipLF {
			r.skipLF = false
			if b, err := r.br.Peek(1); err == nil && b[0] == '\n' {
				_, _ = r.br.Discard(1)
			}
		}
		buf, err := r.buffered()
		if len(buf) == 0 {
			return nil, err // io.EOF drops a partial line, as the standard says
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if err := r.keep(buf); err != nil {
				return nil, err
			}
			_, _ = r.br.Discard(len(buf))
			continue
		}
		if err := r.keep(buf[:i]); err != nil {
			return nil, err
		}
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		return r.line, nil
	}
}

// keep appends part of a line, refusing a line that cannot fit in an event.
func (r *sseReader) keep(b []byte) error {
	// A line holds a field name and its value; allow a short name on top
	// of the limit, which field checks exactly.
	if len(r.line)+len(b)+len(r.data) > r.limit+len("data: ") {
		return fmt.Errorf("%w: a line over %d bytes", errEventTooLarge, r.limit)
	}
	r.line = append(r.line, b...)
	return nil
}

// buffered returns the bytes the reader holds, reading once when it holds
// none.
func (r *sseReader) buffered() ([]byte, error) {
	if r.br.Buffered() == 0 {
		if _, err := r.br.Peek(1); err != nil && r.br.Buffered() == 0 {
			return nil, err
		}
	}
	return r.br.Peek(r.br.Buffered())
}
