package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ndjsonReader reads newline-delimited JSON (Ollama's native stream): one
// object per line, blank lines skipped, CRLF accepted. A last line without
// its newline is delivered only if it is a whole JSON value; otherwise the
// stream was cut off and Next returns io.ErrUnexpectedEOF.
type ndjsonReader struct {
	br    *bufio.Reader
	clock *readClock
	limit int
	line  []byte // a line that spans buffer refills
	ev    streamEvent
	eof   bool
}

// newNDJSONReader reads lines from br, whose source is clock. limit <= 0
// means DefaultMaxEventBytes.
func newNDJSONReader(br *bufio.Reader, clock *readClock, limit int) *ndjsonReader {
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	limit = min(limit, MaxEventBytesLimit) // sizes plus the limit must not wrap
	return &ndjsonReader{br: br, clock: clock, limit: limit}
}

// Next returns the next non-blank line, io.EOF at the end, or an error.
func (r *ndjsonReader) Next() (*streamEvent, error) {
	for {
		if r.eof {
			return nil, io.EOF
		}
		line, err := r.readLine()
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		r.ev.Data = line
		r.ev.Read = r.clock.reads
		r.ev.At = r.clock.at
		return &r.ev, nil
	}
}

// readLine returns the next line without its terminator, valid until the
// next read.
func (r *ndjsonReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(r.line) == 0 {
				if len(chunk)-1 > r.limit {
					return nil, &eventTooLargeError{Limit: r.limit}
				}
				return chunk[:len(chunk)-1], nil
			}
			if len(r.line)+len(chunk)-1 > r.limit {
				return nil, &eventTooLargeError{Limit: r.limit}
			}
			r.line = append(r.line, chunk[:len(chunk)-1]...)
			return r.line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(r.line)+len(chunk) > r.limit {
				return nil, &eventTooLargeError{Limit: r.limit}
			}
			r.line = append(r.line, chunk...)
		case errors.Is(err, io.EOF):
			if len(r.line)+len(chunk) > r.limit {
				return nil, &eventTooLargeError{Limit: r.limit}
			}
			r.line = append(r.line, chunk...)
			last := bytes.TrimSpace(r.line)
			if len(last) == 0 {
				return nil, io.EOF
			}
			if !json.Valid(last) {
				return nil, io.ErrUnexpectedEOF
			}
			r.eof = true
			return last, nil
		default:
			return nil, err
		}
	}
}
