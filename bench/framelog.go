package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode"

	"github.com/latscope/latscope/event"
)

// Clock puts this process's time readings on a time line that the other
// processes on the host share: the wall clock read once, at NewClock, plus
// the monotonic time since. Two processes' clocks then differ only by a
// step of the wall clock between their two NewClock calls (an NTP slew
// changes the wall and the monotonic clock alike).
type Clock struct{ at time.Time }

// NewClock anchors a Clock now.
func NewClock() Clock { return Clock{at: time.Now()} }

// Nanos is t on the shared time line, in nanoseconds.
func (c Clock) Nanos(t time.Time) int64 { return c.at.UnixNano() + int64(t.Sub(c.at)) }

// FrameLog is one request as one side saw it, on a Clock's time line: when
// it began (the client's send, or the server's arrival) and when each
// content frame arrived (client) or was flushed (server).
type FrameLog struct {
	ID string
	OK bool
	// Cut marks a request that did not end well because the run's end cut
	// it short (its drain was over), not because anything failed.
	Cut    bool
	Start  int64
	Frames []int64
}

// ProbeFrameLog is the probe's record of one request as a FrameLog.
func ProbeFrameLog(c Clock, r *event.Request) FrameLog {
	l := FrameLog{ID: r.ID, OK: r.OK(), Cut: !r.OK() && r.RunEnded, Start: c.Nanos(r.Start), Frames: make([]int64, len(r.Chunks))}
	for i, ch := range r.Chunks {
		l.Frames[i] = l.Start + int64(ch.At)
	}
	return l
}

// TraceFrameLog is a bench client's trace of one request as a FrameLog;
// cut says the run's end cut it short.
func TraceFrameLog(c Clock, id string, tr Trace, cut bool) FrameLog {
	l := FrameLog{ID: id, OK: tr.Err == nil, Cut: tr.Err != nil && cut, Start: c.Nanos(tr.Start), Frames: make([]int64, tr.Frames())}
	for i := range l.Frames {
		l.Frames[i] = l.Start + int64(tr.At(i))
	}
	return l
}

// ServerFrameLog is what a FastServer's OnStream reports, as a FrameLog.
func ServerFrameLog(c Clock, id string, arrived time.Time, flushed []time.Time) FrameLog {
	l := FrameLog{ID: id, OK: true, Start: c.Nanos(arrived), Frames: make([]int64, len(flushed))}
	for i, t := range flushed {
		l.Frames[i] = c.Nanos(t)
	}
	return l
}

// FrameLogWriter writes FrameLogs as lines, "ID OK START D1 D2 …" (OK is
// 1, 0, or c for cut; the frames are offsets from START), from any number
// of goroutines. The lines
// are buffered: Close flushes them.
type FrameLogWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	line []byte
	err  error
}

// NewFrameLogWriter returns a writer onto w.
func NewFrameLogWriter(w io.Writer) *FrameLogWriter {
	return &FrameLogWriter{w: bufio.NewWriterSize(w, 256<<10)}
}

// Write adds one line. The first error sticks; Close returns it.
func (fw *FrameLogWriter) Write(l FrameLog) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return
	}
	b := fw.line[:0]
	for _, r := range l.ID { // one field, whatever the id holds
		if unicode.IsSpace(r) || r == 0 {
			r = '_'
		}
		b = append(b, string(r)...)
	}
	if l.ID == "" {
		b = append(b, '-')
	}
	ok := byte('0')
	switch {
	case l.OK:
		ok = '1'
	case l.Cut:
		ok = 'c'
	}
	b = append(b, ' ', ok, ' ')
	b = strconv.AppendInt(b, l.Start, 10)
	for _, f := range l.Frames {
		b = append(b, ' ')
		b = strconv.AppendInt(b, f-l.Start, 10)
	}
	b = append(b, '\n')
	fw.line = b
	_, fw.err = fw.w.Write(b)
}

// Close flushes what is buffered and returns the first error.
func (fw *FrameLogWriter) Close() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err == nil {
		fw.err = fw.w.Flush()
	}
	if fw.err != nil {
		return fmt.Errorf("write frame log: %w", fw.err)
	}
	return nil
}

// maxFrameLogLine bounds one line ReadFrameLogs accepts.
const maxFrameLogLine = 64 << 20

// ReadFrameLogs calls fn with each line of r, in order. A line that does not
// parse is an error naming it.
func ReadFrameLogs(r io.Reader, fn func(FrameLog) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxFrameLogLine)
	for n := 1; sc.Scan(); n++ {
		l, err := parseFrameLog(sc.Bytes())
		if err != nil {
			return fmt.Errorf("frame log line %d: %w", n, err)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read frame log: %w", err)
	}
	return nil
}

func parseFrameLog(line []byte) (FrameLog, error) {
	f := bytes.Fields(line)
	if len(f) < 3 {
		return FrameLog{}, errors.New("want an id, an ok flag and a start")
	}
	l := FrameLog{ID: string(f[0]), OK: string(f[1]) == "1", Cut: string(f[1]) == "c"}
	if !l.OK && !l.Cut && string(f[1]) != "0" {
		return FrameLog{}, fmt.Errorf("ok flag %q: want 0, 1 or c", f[1])
	}
	var err error
	if l.Start, err = strconv.ParseInt(string(f[2]), 10, 64); err != nil {
		return FrameLog{}, fmt.Errorf("start: %w", err)
	}
	l.Frames = make([]int64, len(f)-3)
	for i, s := range f[3:] {
		d, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return FrameLog{}, fmt.Errorf("frame %d: %w", i, err)
		}
		l.Frames[i] = l.Start + d
	}
	return l, nil
}
