package event

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrVersion is returned for a record written by an incompatible schema version.
var ErrVersion = errors.New("unsupported event schema version")

// MaxLineBytes bounds one encoded event when reading a stream of them, so a
// corrupt file cannot make the reader allocate without limit.
const MaxLineBytes = 16 << 20

// Marshal encodes e as one line of JSON (without the newline). A zero V is
// filled in with SchemaVersion.
func Marshal(e Event) ([]byte, error) {
	if e.V == 0 {
		e.V = SchemaVersion
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(e)
}

// Unmarshal decodes and validates one encoded event, its text made safe
// to show (Safe).
func Unmarshal(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	if e.Request != nil {
		canonicalStages(e.Request)
	}
	// What was decoded came from a file or over the network: its text is
	// made safe to show here, once, for every reader.
	return Safe(e), nil
}

// Validate checks the version and that exactly the payload named by Kind is set.
func (e Event) Validate() error {
	if e.V != SchemaVersion {
		return fmt.Errorf("%w: %d (this build reads %d)", ErrVersion, e.V, SchemaVersion)
	}
	set := 0
	for _, p := range []bool{e.Request != nil, e.Server != nil, e.GPU != nil, e.Marker != nil,
		e.Session != nil, e.Probe != nil, e.Span != nil, e.Loss != nil, e.Host != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("event of kind %q carries %d payloads, want 1", e.Kind, set)
	}
	ok := false
	switch e.Kind {
	case KindRequest:
		ok = e.Request != nil
	case KindServer:
		ok = e.Server != nil
	case KindGPU:
		ok = e.GPU != nil
	case KindMarker:
		ok = e.Marker != nil
	case KindSession:
		ok = e.Session != nil
	case KindProbe:
		ok = e.Probe != nil
	case KindSpan:
		ok = e.Span != nil
	case KindLoss:
		ok = e.Loss != nil
	case KindHost:
		ok = e.Host != nil
	default:
		return fmt.Errorf("unknown event kind %q", e.Kind)
	}
	if !ok {
		return fmt.Errorf("event of kind %q carries another kind's payload", e.Kind)
	}
	return nil
}

// Encoder writes events as JSON Lines.
type Encoder struct {
	w *bufio.Writer
}

// NewEncoder returns an Encoder writing to w. Call Flush when done.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: bufio.NewWriter(w)} }

// Encode writes one event and a newline.
func (enc *Encoder) Encode(e Event) error {
	b, err := Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := enc.w.Write(b); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}

// Flush writes any buffered events.
func (enc *Encoder) Flush() error { return enc.w.Flush() }

// Decoder reads events written as JSON Lines.
type Decoder struct {
	r    *bufio.Reader
	line int
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{r: bufio.NewReaderSize(r, 64<<10)} }

// ErrTruncated is returned when the stream ends inside a record (a file cut
// off mid-write). Every complete record before it has been returned.
var ErrTruncated = errors.New("truncated event at end of stream")

// Decode returns the next event, io.EOF at a clean end, or an error that
// names the line. Blank lines are skipped.
func (d *Decoder) Decode() (Event, error) {
	for {
		line, err := d.readLine()
		if err != nil {
			return Event{}, err
		}
		d.line++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		e, err := Unmarshal(line)
		if err != nil {
			return Event{}, fmt.Errorf("line %d: %w", d.line, err)
		}
		return e, nil
	}
}

func (d *Decoder) readLine() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLineBytes {
			return nil, fmt.Errorf("line %d: event longer than %d bytes", d.line+1, MaxLineBytes)
		}
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(bytes.TrimSpace(buf)) == 0 {
				return nil, io.EOF
			}
			// A last line without its newline: accept it if it is a whole
			// record, otherwise report the truncation.
			if json.Valid(bytes.TrimSpace(buf)) {
				return buf, nil
			}
			return nil, fmt.Errorf("line %d: %w", d.line+1, ErrTruncated)
		default:
			return nil, fmt.Errorf("read events: %w", err)
		}
	}
}
