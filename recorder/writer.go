package recorder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/atomicfile"
	"github.com/latscope/latscope/internal/fileread"
)

// DefaultFlushInterval is the longest an event waits in memory before it is
// written, and so the most a crash can lose.
const DefaultFlushInterval = time.Second

// frameTarget is the JSON size at which a frame ends before its interval is
// up, so that a burst cannot grow a frame, or a reader's buffer, without
// limit. Larger frames compress a little better; this is plenty.
const frameTarget = 1 << 20

// Options configure a Writer. The zero value is ready to use.
type Options struct {
	// Overwrite lets Create replace an existing file; without it Create
	// refuses to.
	Overwrite bool
	// FlushInterval is how often Record ends a frame; zero means, and more
	// than DefaultFlushInterval is capped to, DefaultFlushInterval.
	FlushInterval time.Duration
	// Sync makes every frame of a file from Create durable (fsync) as it
	// is written, so that a power cut, not only a killed process, loses at
	// most one interval. It costs a disk round trip per frame. Close syncs
	// in any case.
	Sync bool
	// Clock times flushes and writes; nil means the system clock.
	Clock Clock
}

// Stats describe a Writer's progress; Writer.Stats is safe to call from any
// goroutine, e.g. a status bar's. How long the fan-out in front of the
// recorder waited for it is in that subscription's pipeline.Stats.Blocked.
type Stats struct {
	Events    int64         // events in frames handed to the operating system: a crash no longer loses them
	Frames    int64         // zstd frames of events written, the session header's included
	Bytes     int64         // bytes written: the file's size
	JSONBytes int64         // the same events as uncompressed JSON Lines
	WriteTime time.Duration // time spent in write (and sync) calls
	LastWrite time.Duration // the latest frame's write
	// Behind is set while the latest frame took longer to write than the
	// flush interval: the disk is not keeping up with the events.
	Behind bool
	// Unwritten counts events that could not be recorded; Err says why.
	Unwritten int64
	Err       error // the first failure, if any
	// Broken is set once a failed write left a part of a frame in the file
	// that could not be taken back: nothing more is appended. Until then a
	// failed frame's events are counted in Unwritten and later frames are
	// still tried (a full disk may get room again).
	Broken bool
}

// Writer records events to a file in the format described in the package
// documentation. Write, Flush, Record and Close belong to one goroutine;
// Stats may be called from any.
type Writer struct {
	out      io.Writer
	file     *atomicfile.File // set when Create opened it; Close puts it in place or removes it
	header   event.Session
	interval time.Duration
	sync     bool
	clock    Clock

	zenc    *zstd.Encoder
	lines   bytes.Buffer  // the open frame: JSON Lines not yet written
	json    *json.Encoder // encodes into lines
	frame   []byte        // the compressed frame, reused
	pending int64         // events in lines
	broken  error         // a write failed: the file may end in a torn frame, so nothing more is appended
	closed  bool
	failed  chan struct{} // signalled (without waiting) at every failure; see Failed

	mu    sync.Mutex
	stats Stats
}

// Create starts a recording at path, readable and writable by its owner
// only (mode 0600), and writes the file header and the session header.
// The recording is written under path + ".partial", which a reader may
// open while it grows, and Close puts it at path in one rename: path holds
// a whole recording or nothing. If any event could not be written (a full
// disk), Close removes the partial file instead and says so: a recording
// that silently lacks a stretch of the run is worse than none.
//
// Create refuses to replace an existing file unless opts.Overwrite is set,
// and refuses anything but a regular file even then: a symbolic link, a
// device such as /dev/null, a FIFO or a directory. A file it replaces
// keeps its mode.
func Create(path string, header *event.Session, opts Options) (*Writer, error) {
	if header == nil {
		return nil, errors.New("create recording: no session header")
	}
	if _, err := look(path, opts); err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	f, err := atomicfile.CreateStream(path, atomicfile.Options{Overwrite: opts.Overwrite, Perm: 0o600})
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	// A umask may have narrowed the new file's mode; O_EXCL made it ours.
	if err := os.Chmod(f.Name(), 0o600); err != nil {
		f.Abort()
		return nil, fmt.Errorf("create recording: %w", err)
	}
	w, err := NewWriter(f, header, opts)
	if err != nil {
		f.Abort() // leave no file that is not a recording behind
		return nil, err
	}
	w.file = f
	return w, nil
}

// NewWriter writes a recording to out, starting with the file header and the
// session header. Close flushes it but does not close out.
func NewWriter(out io.Writer, header *event.Session, opts Options) (*Writer, error) {
	if header == nil {
		return nil, errors.New("create recording: no session header")
	}
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(true))
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	w := &Writer{
		out:      out,
		header:   *header,
		interval: flushInterval(opts.FlushInterval),
		sync:     opts.Sync,
		clock:    clockOrSystem(opts.Clock),
		zenc:     zenc,
		failed:   make(chan struct{}, 1),
	}
	w.json = json.NewEncoder(&w.lines)
	if err := w.writeHeader(); err != nil {
		zenc.Close()
		return nil, err
	}
	return w, nil
}

func flushInterval(d time.Duration) time.Duration {
	if d <= 0 || d > DefaultFlushInterval {
		return DefaultFlushInterval
	}
	return d
}

// writeHeader writes the file header and the session header in one write, so
// that a file that has either has both.
func (w *Writer) writeHeader() error {
	if err := w.encode(event.NewSession(&w.header)); err != nil {
		return fmt.Errorf("create recording: %w", err)
	}
	w.frame = appendHeaderFrame(w.frame[:0], fileHeader{Magic: fileMagic, Format: FormatVersion, Schema: event.SchemaVersion})
	w.frame = w.zenc.EncodeAll(w.lines.Bytes(), w.frame)
	took, _, err := w.writeFrame(w.frame)
	if err != nil {
		return fmt.Errorf("create recording: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Events, w.stats.Frames = 1, 1
	w.stats.Bytes = int64(len(w.frame))
	w.stats.JSONBytes = int64(w.lines.Len())
	w.stats.WriteTime, w.stats.LastWrite = took, took
	w.lines.Reset()
	return nil
}

// Write adds ev to the open frame, and writes the frame only once it is
// full; Flush, and Record every interval, write it sooner. A session event
// equal to the header is not written again, so that a fan-out that
// published the header can be recorded whole.
func (w *Writer) Write(ev event.Event) error {
	if err := w.usable(); err != nil {
		w.fail(err, 1)
		return err
	}
	if w.isHeader(ev) {
		return nil
	}
	if err := w.encode(ev); err != nil {
		w.fail(err, 1)
		return err
	}
	w.pending++
	if w.lines.Len() >= frameTarget {
		return w.Flush()
	}
	return nil
}

func (w *Writer) usable() error {
	if w.closed {
		return errors.New("record event: recording closed")
	}
	return w.broken
}

func (w *Writer) isHeader(ev event.Event) bool {
	return ev.Kind == event.KindSession && ev.Session != nil && reflect.DeepEqual(*ev.Session, w.header)
}

// encode appends ev as one JSON line, byte for byte what event.Marshal
// writes, without Marshal's extra copy.
func (w *Writer) encode(ev event.Event) error {
	if ev.V == 0 {
		ev.V = event.SchemaVersion
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("record %s event: %w", ev.Kind, err)
	}
	mark := w.lines.Len()
	if err := w.json.Encode(ev); err != nil {
		w.lines.Truncate(mark)
		return fmt.Errorf("record %s event: %w", ev.Kind, err)
	}
	if n := w.lines.Len() - mark; n > event.MaxLineBytes {
		w.lines.Truncate(mark)
		return fmt.Errorf("record %s event: %d bytes, more than the %d a reader accepts", ev.Kind, n, event.MaxLineBytes)
	}
	return nil
}

// Flush ends the open frame and hands it to the operating system in one
// write (and syncs it with Options.Sync). After Flush returns, a killed
// process no longer loses the events written before it.
func (w *Writer) Flush() error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.pending == 0 {
		return nil
	}
	w.frame = w.zenc.EncodeAll(w.lines.Bytes(), w.frame[:0])
	took, n, err := w.writeFrame(w.frame)
	if err != nil {
		// The frame's events are dropped, not kept for a retry that could
		// hold memory without bound; the file stays appendable if no byte
		// of the frame is left in it.
		if terr := w.takeBack(n); terr != nil {
			w.broken = errors.Join(err, terr)
		}
		w.lines.Reset()
		dropped := w.pending
		w.pending = 0
		w.fail(err, dropped)
		return err
	}
	w.mu.Lock()
	w.stats.Events += w.pending
	w.stats.Frames++
	w.stats.Bytes += int64(len(w.frame))
	w.stats.JSONBytes += int64(w.lines.Len())
	w.stats.WriteTime += took
	w.stats.LastWrite = took
	w.stats.Behind = took > w.interval
	w.mu.Unlock()
	w.lines.Reset()
	w.pending = 0
	return nil
}

// writeFrame writes b and returns how long it took and how many of its
// bytes were written.
func (w *Writer) writeFrame(b []byte) (time.Duration, int, error) {
	start := w.clock.Now()
	n, err := w.out.Write(b)
	if err != nil {
		return 0, n, fmt.Errorf("write recording: %w", err)
	}
	if w.sync && w.file != nil {
		if err := w.file.Sync(); err != nil {
			// The frame may or may not be durable; it is in the file.
			return 0, n, fmt.Errorf("sync recording: %w", err)
		}
	}
	return w.clock.Now().Sub(start), n, nil
}

// takeBack removes the n bytes a failed write left of a frame, so that the
// file ends at a frame's end and later frames can follow it. Only a file
// from Create can be cut back; another writer that took part of a frame is
// torn for good.
func (w *Writer) takeBack(n int) error {
	if n <= 0 {
		return nil
	}
	if w.file == nil {
		return fmt.Errorf("a part of a frame (%d bytes) was written and cannot be taken back", n)
	}
	good := w.Stats().Bytes
	if err := w.file.Truncate(good); err != nil {
		return fmt.Errorf("cut a torn frame off the recording: %w", err)
	}
	if _, err := w.file.Seek(good, io.SeekStart); err != nil {
		return fmt.Errorf("cut a torn frame off the recording: %w", err)
	}
	return nil
}

// fail counts events that were not recorded and keeps the first reason.
func (w *Writer) fail(err error, events int64) {
	w.mu.Lock()
	w.stats.Unwritten += events
	if w.stats.Err == nil {
		w.stats.Err = err
	}
	w.stats.Broken = w.broken != nil
	w.mu.Unlock()
	select {
	case w.failed <- struct{}{}:
	default: // one signal pending is enough: Stats has the counts
	}
}

// Failed is signalled, without waiting on its reader, whenever events
// could not be recorded; Stats then says how many, and why. It lets a
// watcher say a failure as it happens instead of polling.
func (w *Writer) Failed() <-chan struct{} { return w.failed }

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Close writes the open frame and ends the file: a file from Create is
// synced and put in place, or removed if any event could not be recorded.
// It returns an error if any event could not be recorded, saying how many.
// Closing twice is harmless.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	_ = w.Flush() // a failure is counted in Stats, reported below
	w.closed = true
	w.zenc.Close()
	st := w.Stats()
	if st.Err != nil {
		err := fmt.Errorf("recording incomplete, %d events not recorded: %w", st.Unwritten, st.Err)
		if w.file != nil {
			err = fmt.Errorf("%w; no recording is kept at %s", err, w.file.Target())
			return errors.Join(err, w.file.Abort())
		}
		return err
	}
	if w.file != nil {
		if err := w.file.Commit(); err != nil {
			return fmt.Errorf("close recording: %w", err)
		}
	}
	return nil
}

// Record writes every event received from events, ending a frame every
// flush interval, until events is closed; then it closes the writer and
// returns Close's error. It suits a lossless fan-out subscription: a write
// failure does not stop it, so the fan-out is never held up by a recorder
// that gave up (the failure is in Stats and in the error returned).
//
// If ctx ends first, Record writes the events already buffered in events,
// closes the writer and returns; later events are not recorded, and the
// caller must unsubscribe. Pass a context that outlives a Ctrl-C (the
// pipeline drains after one) unless the recording is to be abandoned.
//
// A session header other than the file's is not written: a recording holds
// one session. Use RecordSession where a stream may start a new one.
func (w *Writer) Record(ctx context.Context, events <-chan event.Event) error {
	next, err := w.RecordSession(ctx, events)
	if next == nil {
		return err
	}
	// The file holds its session whole; what follows is not recorded, but
	// a lossless subscription is still read to its end.
	n := 1
	for range events {
		n++
	}
	return errors.Join(err, fmt.Errorf("a second session header (started %s) ended the recording: %d events after it not recorded",
		next.Time.Format(time.RFC3339), n))
}

// RecordSession is Record, except that it also ends, closing the writer,
// when a session header other than the file's arrives (an agent that
// restarted begins a new session): it returns that header, and the events
// after it are left in events for the next session's writer.
func (w *Writer) RecordSession(ctx context.Context, events <-chan event.Event) (next *event.Session, err error) {
	tick := w.clock.After(w.interval)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil, w.Close()
			}
			if ev.Kind == event.KindSession && ev.Session != nil && !w.isHeader(ev) {
				return ev.Session, w.Close()
			}
			_ = w.Write(ev) // counted in Stats and reported by Close
		case <-tick:
			_ = w.Flush() // likewise
			tick = w.clock.After(w.interval)
		case <-ctx.Done():
			w.drain(events)
			return nil, errors.Join(fmt.Errorf("recording stopped early: %w", ctx.Err()), w.Close())
		}
	}
}

// drain writes the events already buffered in events, without waiting for
// more, so that a producer that keeps sending cannot hold it.
func (w *Writer) drain(events <-chan event.Event) {
	for n := len(events); n > 0; n-- {
		ev, ok := <-events
		if !ok {
			return
		}
		_ = w.Write(ev)
	}
}

// CheckPath says whether Create could write a recording at path, without
// creating anything: a command checks its --record before it contacts a
// server, so a typo costs nothing.
func CheckPath(path string, opts Options) error {
	created, err := look(path, opts)
	if err != nil {
		return err
	}
	partial := path + atomicfile.PartialSuffix
	if _, err := os.Lstat(partial); err == nil {
		return fmt.Errorf("%s: %s already exists: a run may be writing it, or one that was interrupted left it (read it, then remove it): %w", path, partial, fs.ErrExist)
	}
	if !created {
		return nil // an existing regular file, to overwrite
	}
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s: the directory %s: %w", path, dir, err)
	case !info.IsDir():
		return fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	return nil
}

// look checks path before it is opened: opening a FIFO for writing blocks,
// and O_TRUNC must not reach anything but a regular file (a symbolic link
// is refused, not followed: overwriting must not land elsewhere). It
// reports whether the file is to be created.
func look(path string, opts Options) (create bool, err error) {
	info, err := os.Lstat(path)
	switch {
	case err == nil && !info.Mode().IsRegular():
		return false, fmt.Errorf("%s: %w (%s)", path, fileread.ErrNotRegular, fileread.Kind(info.Mode()))
	case err == nil && !opts.Overwrite:
		return false, fmt.Errorf("%s already exists (choose another name, or allow overwriting): %w", path, fs.ErrExist)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	return err != nil, nil
}
