package recorder

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/latscope/latscope/event"
)

// FormatVersion is the version of the file layout written by this build.
// Bump it on any change a reader of the previous layout would misread.
const FormatVersion = 1

// MaxFrameBytes bounds one frame, compressed or decompressed, so that a
// damaged or hostile file cannot make the reader allocate without limit. The
// writer's frames stay far below it: about 1 MiB plus one event, and one
// event is at most event.MaxLineBytes.
const MaxFrameBytes = 32 << 20

const (
	fileMagic = "latscope-recording"

	zstdMagic      = 0xFD2FB528
	skippableMagic = 0x184D2A50 // the first of the 16 skippable magics; the header uses it
	skippableMask  = 0xFFFFFFF0
	maxBlockBytes  = 128 << 10 // the largest block RFC 8878 allows
	maxHeaderBytes = 64 << 10
)

// ErrNotRecording is returned for a file that is not a latscope recording.
var ErrNotRecording = errors.New("not a latscope recording")

// ErrVersion is returned for a recording written in a format or event schema
// version this build cannot read; the message names both versions.
var ErrVersion = errors.New("unsupported recording version")

// TornTailError says that a recording ends inside a frame: the writer was
// stopped mid-write (killed, or out of disk). Every event of the complete
// frames before Offset has been returned; it is a warning more than a
// failure.
type TornTailError struct {
	Offset int64 // where the incomplete frame begins
	Size   int64 // bytes from Offset to the end of the file
}

func (e *TornTailError) Error() string {
	return fmt.Sprintf("recording cut short: the %d bytes from offset %d are an incomplete frame (the writer stopped mid-write); every event before them was read", e.Size, e.Offset)
}

// JoinedError says that a second recording begins at Offset: two files were
// joined (cat a b > c). Reading stops there rather than sum two sessions as
// one; every event before Offset has been returned.
type JoinedError struct {
	Offset int64 // where the second recording's file header begins
}

func (e *JoinedError) Error() string {
	return fmt.Sprintf("a second recording begins at byte offset %d: this file is two recordings joined (as by cat a b > c), which cannot be summed as one session; split it at that offset (head -c %d) and read each part", e.Offset, e.Offset)
}

// SessionError says that a second session header comes at line Line of the
// frame at Offset. A recording holds one session: its request ids are unique
// within it, and a replay or a report is of one run, so reading stops there
// rather than sum two sessions' requests as one. Every event before it has
// been returned.
type SessionError struct {
	Offset int64 // where the frame holding the second header begins
	Line   int   // the header's line in that frame, from 1
}

func (e *SessionError) Error() string {
	return fmt.Sprintf("a second session header at line %d of the frame at byte offset %d: a recording holds one session, and two are not summed as one (was another run's stream recorded into this file?); every event before it was read", e.Line, e.Offset)
}

// CorruptError says that the frame at Offset is damaged or is not a frame.
// Every event of the frames before it has been returned.
type CorruptError struct {
	Offset int64 // where the damaged frame begins
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt recording at offset %d: %v", e.Offset, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// fileHeader is the payload of the skippable frame that opens a recording.
type fileHeader struct {
	Magic  string `json:"magic"`
	Format int    `json:"format"`
	Schema int    `json:"schema"`
}

// appendHeaderFrame appends the skippable frame that opens a recording.
func appendHeaderFrame(dst []byte, h fileHeader) []byte {
	payload, err := json.Marshal(h)
	if err != nil {
		panic(err) // a struct of strings and ints always marshals
	}
	payload = append(payload, '\n')
	dst = binary.LittleEndian.AppendUint32(dst, skippableMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// check refuses a header this build cannot read.
func (h fileHeader) check() error {
	if h.Magic != fileMagic {
		return ErrNotRecording
	}
	if h.Format != FormatVersion {
		return fmt.Errorf("%w: the file's format is version %d, this build reads version %d", ErrVersion, h.Format, FormatVersion)
	}
	if h.Schema != event.SchemaVersion {
		return fmt.Errorf("%w: the file's events use schema version %d, this build reads version %d", ErrVersion, h.Schema, event.SchemaVersion)
	}
	return nil
}

// frame is one whole frame as it lies in the file.
type frame struct {
	offset    int64
	skippable bool
	data      []byte // a skippable frame's payload, or a zstd frame's bytes (header included); valid until the next read
}

// frameScanner splits a recording into frames by walking the zstd frame and
// block headers, without decompressing. Knowing where each frame ends is what
// tells a torn tail (the input ends inside a frame) from damage (the bytes
// are not a frame).
type frameScanner struct {
	r   *bufio.Reader
	off int64 // bytes consumed so far
	buf bytes.Buffer
}

func newFrameScanner(r io.Reader) *frameScanner {
	return &frameScanner{r: bufio.NewReaderSize(r, 256<<10)}
}

// next reads the next frame. It returns io.EOF at a clean end, a
// *TornTailError when the input ends inside a frame, and a *CorruptError when
// the bytes are not a well-formed frame.
func (s *frameScanner) next() (frame, error) {
	start := s.off
	s.buf.Reset()
	err := s.readFrame()
	switch {
	case err == nil:
		return frame{offset: start, skippable: s.isSkippable(), data: s.payload()}, nil
	case errors.Is(err, io.EOF) && s.off == start:
		return frame{}, io.EOF
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return frame{}, &TornTailError{Offset: start, Size: s.off - start}
	case errors.Is(err, errMalformed):
		return frame{}, &CorruptError{Offset: start, Err: err}
	default:
		return frame{}, fmt.Errorf("read recording at offset %d: %w", start, err)
	}
}

// errMalformed marks bytes that are not a frame, as opposed to a read error.
var errMalformed = errors.New("malformed frame")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

func (s *frameScanner) magic() uint32 { return binary.LittleEndian.Uint32(s.buf.Bytes()) }

func (s *frameScanner) isSkippable() bool { return s.magic()&skippableMask == skippableMagic }

func (s *frameScanner) payload() []byte {
	if s.isSkippable() {
		return s.buf.Bytes()[8:]
	}
	return s.buf.Bytes()
}

func (s *frameScanner) readFrame() error {
	if err := s.copyN(4); err != nil {
		return err
	}
	switch m := s.magic(); {
	case m == zstdMagic:
		return s.readZstdFrame()
	case m&skippableMask == skippableMagic:
		if err := s.copyN(4); err != nil {
			return err
		}
		size := binary.LittleEndian.Uint32(s.buf.Bytes()[4:])
		if size > MaxFrameBytes {
			return malformed("skippable frame of %d bytes, more than %d", size, MaxFrameBytes)
		}
		return s.copyN(int64(size))
	default:
		return malformed("no zstd frame starts here (magic %#08x)", m)
	}
}

// readZstdFrame reads the rest of a zstd frame whose magic has been read:
// the frame header, the blocks up to the last one, and the checksum.
func (s *frameScanner) readZstdFrame() error {
	if err := s.copyN(1); err != nil {
		return err
	}
	desc := s.buf.Bytes()[4]
	if desc&0x08 != 0 {
		return malformed("reserved bit set in the frame header")
	}
	if err := s.copyN(frameHeaderRest(desc)); err != nil {
		return err
	}
	for last := false; !last; {
		if err := s.copyN(3); err != nil {
			return err
		}
		b := s.buf.Bytes()
		var size int64
		var err error
		last, size, err = blockContentSize([3]byte(b[len(b)-3:]))
		if err != nil {
			return err
		}
		if err := s.copyN(size); err != nil {
			return err
		}
		if s.buf.Len() > MaxFrameBytes {
			return malformed("frame longer than %d bytes", MaxFrameBytes)
		}
	}
	if desc&0x04 != 0 { // content checksum
		return s.copyN(4)
	}
	return nil
}

// frameHeaderRest is the size of a zstd frame header after its descriptor
// byte: window descriptor, dictionary id and frame content size.
func frameHeaderRest(desc byte) int64 {
	singleSegment := desc&0x20 != 0
	n := int64([4]int{0, 1, 2, 4}[desc&0x03]) // dictionary id
	if !singleSegment {
		n++ // window descriptor
	}
	switch desc >> 6 { // frame content size
	case 0:
		if singleSegment {
			n++
		}
	case 1:
		n += 2
	case 2:
		n += 4
	case 3:
		n += 8
	}
	return n
}

// blockContentSize decodes a block header: whether it is the frame's last
// block, and how many bytes of content follow it.
func blockContentSize(hdr [3]byte) (last bool, size int64, err error) {
	v := uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16
	last = v&1 != 0
	size = int64(v >> 3)
	if size > maxBlockBytes {
		return false, 0, malformed("block of %d bytes, more than %d", size, maxBlockBytes)
	}
	switch (v >> 1) & 3 {
	case 0, 2: // raw, compressed
		return last, size, nil
	case 1: // run length: one byte, repeated
		return last, 1, nil
	default:
		return false, 0, malformed("reserved block type")
	}
}

// copyN appends the next n bytes to the frame. The buffer grows with the
// bytes actually read, not with the size a header claims.
func (s *frameScanner) copyN(n int64) error {
	got, err := io.CopyN(&s.buf, s.r, n)
	s.off += got
	if err == nil || got == 0 && errors.Is(err, io.EOF) {
		return err
	}
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
