// Package fileread opens the files named on the command line for reading,
// so that no flag can make latscope block or read without bound: only a
// regular file is opened (a FIFO, a device such as /dev/zero, a directory
// or a socket is refused, saying which), a size limit is checked before
// reading and enforced while reading (a file that grows stays bounded), and
// standard input is read through a reader that a context can abandon.
package fileread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Common limits, named in errors through Limit.What.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// Limit says how a file is named in errors and how much of it may be read.
type Limit struct {
	// Flag names where the path came from ("--ca-cert"); errors start with
	// it and the path. Empty: errors start with the path.
	Flag string
	// Max is the most bytes that may be read; 0 means no byte limit, for a
	// file read as a stream whose reader bounds each record.
	Max int64
	// What the limit is for, after "the 1 MiB limit for": "a certificate".
	What string
}

// name is how errors name the file.
func (l Limit) name(path string) string {
	if l.Flag == "" {
		return path
	}
	return l.Flag + " " + path
}

// ErrNotRegular is wrapped by the error for anything but a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file over its limit.
var ErrTooLarge = errors.New("over the size limit")

// Open opens path for reading if it is a regular file within the limit.
// It never blocks on a FIFO: the path is checked with os.Stat before it is
// opened, opened non-blocking where the system allows, and checked again
// once open, so a file swapped in between is refused too. Reads past
// l.Max return an error wrapping ErrTooLarge, not a silent end.
func Open(path string, l Limit) (io.ReadCloser, error) {
	f, err := openRegular(path, l)
	if err != nil {
		return nil, err
	}
	if l.Max <= 0 {
		return f, nil
	}
	return &limited{f: f, left: l.Max, path: path, l: l}, nil
}

// openRegular opens path if it is a regular file within l.Max (as Open).
func openRegular(path string, l Limit) (*os.File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.name(path), unwrapPath(err))
	}
	if err := check(path, info, l); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|NonBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.name(path), unwrapPath(err))
	}
	if info, err = f.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", l.name(path), err)
	}
	if err := check(path, info, l); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the whole of the regular file at path, at most l.Max bytes
// (which should be set: ReadFile holds the file in memory).
func ReadFile(path string, l Limit) ([]byte, error) {
	rc, err := Open(path, l)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", l.name(path), err)
	}
	return b, nil
}

// check refuses anything but a regular file, and one over the limit.
func check(path string, info fs.FileInfo, l Limit) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", l.name(path), ErrNotRegular, Kind(info.Mode()))
	}
	if l.Max > 0 && info.Size() > l.Max {
		return tooLarge(path, info.Size(), l)
	}
	return nil
}

// tooLarge says a file is over its limit; size < 0: it grew past the limit
// while being read.
func tooLarge(path string, size int64, l Limit) error {
	limit := "the " + Size(l.Max) + " limit"
	if l.What != "" {
		limit += " for " + l.What
	}
	if size < 0 {
		return &sizeError{fmt.Sprintf("%s: grew past %s while being read", l.name(path), limit)}
	}
	return &sizeError{fmt.Sprintf("%s: %s is over %s", l.name(path), Size(size), limit)}
}

type sizeError struct{ msg string }

func (e *sizeError) Error() string        { return e.msg }
func (e *sizeError) Is(target error) bool { return target == ErrTooLarge }

// Kind names the kind of file a mode describes, for an error: "a
// directory", "a FIFO (named pipe)", "a character device".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a plain file (" + m.Type().String() + ")"
}

// Size writes a byte count for people: "512 B", "1 MiB", "2.0 GiB".
func Size(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < KiB {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/KiB, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// unwrapPath drops the *fs.PathError's own "op path:" prefix: the error
// already names the path, with its flag.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// limited reads a file up to a limit and fails past it: a file that grows
// while it is read is still bounded.
type limited struct {
	f    *os.File
	left int64
	path string
	l    Limit
}

func (r *limited) Read(p []byte) (int, error) {
	if r.left < 0 {
		return 0, tooLarge(r.path, -1, r.l)
	}
	// Read one byte past the limit, to tell "ends at the limit" from "goes
	// on past it".
	if int64(len(p)) > r.left+1 {
		p = p[:r.left+1]
	}
	n, err := r.f.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n + int(r.left), tooLarge(r.path, -1, r.l)
	}
	return n, err
}

func (r *limited) Close() error { return r.f.Close() }

// IsStdin reports whether path names standard input: "-", or /dev/stdin
// and its aliases.
func IsStdin(path string) bool {
	switch path {
	case "-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0":
		return true
	}
	return false
}

// Stream returns a reader of in that gives up when ctx ends: a read blocked
// on a pipe or a terminal cannot be interrupted, so the reads happen in a
// goroutine this reader owns, and Read returns ctx's error as soon as ctx
// ends. Then in is closed if it can be, which wakes the goroutine where the
// system allows; where it does not, the goroutine is left blocked and ends
// with the process. Close stops the goroutine the same way (closing in): a
// reader that stops before the end does not leave it reading.
func Stream(ctx context.Context, in io.Reader) io.ReadCloser {
	ctx, stop := context.WithCancel(ctx)
	s := &stream{ctx: ctx, stop: stop, chunks: make(chan chunk), free: make(chan []byte, 1)}
	s.free <- make([]byte, 64*KiB)
	go s.pump(in)
	return s
}

type chunk struct {
	b   []byte
	err error
}

type stream struct {
	ctx    context.Context
	stop   context.CancelFunc
	chunks chan chunk
	free   chan []byte // the buffer, handed back once consumed
	cur    []byte      // the part of the latest chunk not yet read
	buf    []byte      // the latest chunk's buffer
	err    error       // sticky
}

// pump reads in until an error, one chunk at a time.
func (s *stream) pump(in io.Reader) {
	defer func() {
		if c, ok := in.(io.Closer); ok && s.ctx.Err() != nil {
			_ = c.Close()
		}
	}()
	stop := context.AfterFunc(s.ctx, func() {
		if c, ok := in.(io.Closer); ok {
			_ = c.Close() // wakes a read blocked on a pollable file
		}
	})
	defer stop()
	for {
		var buf []byte
		select {
		case buf = <-s.free:
		case <-s.ctx.Done():
			return
		}
		n, err := in.Read(buf)
		select {
		case s.chunks <- chunk{b: buf[:n], err: err}:
		case <-s.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// Close stops reading in; a later Read returns context.Canceled.
func (s *stream) Close() error {
	s.stop()
	return nil
}

func (s *stream) Read(p []byte) (int, error) {
	for len(s.cur) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.buf != nil {
			s.free <- s.buf[:cap(s.buf)]
			s.buf = nil
		}
		select {
		case c := <-s.chunks:
			s.buf, s.cur, s.err = c.b, c.b, c.err
		case <-s.ctx.Done():
			s.err = s.ctx.Err()
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}
