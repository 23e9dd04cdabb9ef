package recorder

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/fileread"
)

// Reader iterates a recording's events in file order, the session header
// first. It streams: it holds one frame at a time, and the ids of the
// latest requests (see RecentRequestIDs).
//
// A request event whose id it has read already is the same request
// recorded twice: it is dropped, so that every consumer counts each request
// once, and Duplicates counts it.
type Reader struct {
	frames *frameScanner
	dec    *zstd.Decoder
	file   io.Closer // set when Open opened it; Close closes it

	header  *event.Session
	first   *event.Event // the header event, returned by the first Next
	content []byte       // the current frame, decompressed; reused
	rest    []byte       // its lines not yet returned
	frameAt int64        // the current frame's offset
	line    int          // lines returned from the current frame
	err     error        // sticky: every Next after a failure returns it

	requests   recentIDs // the latest request ids read
	duplicates int64     // request events dropped as read before
}

// Open opens the recording at path and reads its headers; see NewReader.
// Only a regular file is opened (a FIFO or a device would block or never
// end; read those with NewReader); the reader streams it, one frame at a
// time, however large it is.
func Open(path string) (*Reader, error) {
	f, err := fileread.Open(path, fileread.Limit{})
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open recording %s: %w", path, err)
	}
	r.file = f
	return r, nil
}

// NewReader reads a recording from in. It reads the file header and the
// session header before it returns, so that a file that is not a
// recording, or that this build cannot read (ErrVersion), is refused here.
// Close releases it.
func NewReader(in io.Reader) (*Reader, error) {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxFrameBytes),
		zstd.WithDecoderMaxWindow(MaxFrameBytes))
	if err != nil {
		return nil, fmt.Errorf("read recording: %w", err)
	}
	r := &Reader{frames: newFrameScanner(in), dec: dec}
	if err := r.readHeaders(); err != nil {
		dec.Close()
		return nil, err
	}
	return r, nil
}

// readHeaders checks the file header and reads the session header.
func (r *Reader) readHeaders() error {
	if err := r.readFileHeader(); err != nil {
		return err
	}
	ev, err := r.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = &TornTailError{Offset: r.frames.off}
		}
		return fmt.Errorf("read session header: %w", err)
	}
	if ev.Kind != event.KindSession {
		return &CorruptError{Offset: r.frameAt, Err: fmt.Errorf("the first event is a %q, not the session header", ev.Kind)}
	}
	r.header, r.first = ev.Session, &ev
	return nil
}

func (r *Reader) readFileHeader() error {
	// Bytes that do not begin like a header are another kind of file; a
	// header cut short is a recording that was killed as it started.
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], skippableMagic)
	head, _ := r.frames.r.Peek(len(magic))
	if len(head) == 0 {
		return fmt.Errorf("%w: the file is empty", ErrNotRecording)
	}
	if !bytes.HasPrefix(magic[:], head) {
		return ErrNotRecording
	}
	f, err := r.frames.next()
	if err != nil {
		return err
	}
	var h fileHeader
	if len(f.data) > maxHeaderBytes || json.Unmarshal(f.data, &h) != nil {
		return ErrNotRecording
	}
	return h.check()
}

// isFileHeader reports whether a skippable frame's payload is a recording's
// file header: where it is not the first frame, a second recording begins.
func isFileHeader(payload []byte) bool {
	var h fileHeader
	return len(payload) <= maxHeaderBytes && json.Unmarshal(payload, &h) == nil && h.Magic == fileMagic
}

// Header returns the recording's session header.
func (r *Reader) Header() *event.Session { return r.header }

// Next returns the next event. At the end of the file it returns io.EOF, or
// a *TornTailError when the file ends inside a frame; at a damaged frame, a
// *CorruptError; at a second session header, a *SessionError. Either error
// comes after every event before it, and is returned again by every later
// call. A request event read before (by its id) is skipped and counted in
// Duplicates.
func (r *Reader) Next() (event.Event, error) {
	for {
		ev, err := r.next()
		if err != nil || ev.Request == nil || ev.Request.ID == "" || r.requests.add(ev.Request.ID) {
			return ev, err
		}
		r.duplicates++
	}
}

// Duplicates counts the request events Next has dropped because their
// request had been read already.
func (r *Reader) Duplicates() int64 { return r.duplicates }

// next is Next without dropping duplicates.
func (r *Reader) next() (event.Event, error) {
	if r.first != nil {
		ev := *r.first
		r.first = nil
		return ev, nil
	}
	for len(r.rest) == 0 {
		if r.err != nil {
			return event.Event{}, r.err
		}
		r.err = r.nextFrame()
	}
	line, rest, _ := bytes.Cut(r.rest, []byte{'\n'})
	r.rest = rest
	r.line++
	if len(line) > event.MaxLineBytes {
		return r.corruptLine(fmt.Errorf("event of %d bytes, more than %d", len(line), event.MaxLineBytes))
	}
	ev, err := event.Unmarshal(line)
	if err != nil {
		return r.corruptLine(err)
	}
	if ev.Session != nil && r.header != nil {
		r.err, r.rest = &SessionError{Offset: r.frameAt, Line: r.line}, nil
		return event.Event{}, r.err
	}
	return ev, nil
}

func (r *Reader) corruptLine(err error) (event.Event, error) {
	r.err, r.rest = &CorruptError{Offset: r.frameAt, Err: fmt.Errorf("line %d of the frame: %w", r.line, err)}, nil
	return event.Event{}, r.err
}

// nextFrame decompresses the next zstd frame into r.rest, skipping
// skippable frames.
func (r *Reader) nextFrame() error {
	for {
		f, err := r.frames.next()
		if err != nil {
			return err
		}
		if f.skippable {
			if isFileHeader(f.data) {
				return &JoinedError{Offset: f.offset}
			}
			continue
		}
		r.frameAt, r.line = f.offset, 0
		r.content, err = r.dec.DecodeAll(f.data, r.content[:0])
		if err != nil {
			return &CorruptError{Offset: f.offset, Err: fmt.Errorf("decompress frame: %w", err)}
		}
		if len(r.content) > 0 && r.content[len(r.content)-1] != '\n' {
			return &CorruptError{Offset: f.offset, Err: errors.New("frame does not end with a whole line")}
		}
		r.rest = r.content
		if len(r.rest) > 0 {
			return nil
		}
	}
}

// Close releases the decoder and closes the file Open opened.
func (r *Reader) Close() error {
	r.dec.Close()
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}
