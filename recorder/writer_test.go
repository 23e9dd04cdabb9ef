package recorder

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/latscope/latscope/event"
)

func TestRoundTripEveryKind(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.jsonl.zst")
	w, err := Create(path, testHeader(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	events := everyKind(t0)
	for _, ev := range events {
		if err := w.Write(ev); err != nil {
			t.Fatalf("write %s: %v", ev.Kind, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Header(); got.RunID != "ab12" || got.Load.Concurrency != 16 {
		t.Errorf("Header() = %+v, want the session written", got)
	}
	got, err := readAll(mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, append([]event.Event{event.NewSession(testHeader())}, events...))
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCreateMode0600AndNoOverwrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.jsonl.zst")
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(path, testHeader(), Options{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file: got %v, want fs.ErrExist", err)
	}
	if got := string(mustRead(t, path)); got != "precious" {
		t.Fatalf("refused Create changed the file to %q", got)
	}

	w, err := Create(path, testHeader(), Options{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The recording replaced the file whole, and kept its mode.
	if got := fi.Mode().Perm(); got != 0o644 {
		t.Errorf("mode = %v, want the file's own 0644", got)
	}

	fresh := filepath.Join(t.TempDir(), "new.jsonl.zst")
	w, err = Create(fresh, testHeader(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Until Close, the recording is written under its partial name.
	if fi, err := os.Stat(fresh + ".partial"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file: %v, want mode 0600", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the target exists before Close: %v", err)
	}
}

func TestWriteSkipsTheHeaderAgain(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A fan-out publishes the header first; the file already starts with it.
	// Another session's header is written, and a reader stops at it.
	other := event.NewSession(&event.Session{Time: t0, Target: "http://other", Load: event.Load{Mode: "open"}})
	for _, ev := range []event.Event{event.NewSession(testHeader()), everyKind(t0)[0], other} {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(buf.Bytes())
	var second *SessionError
	if !errors.As(err, &second) || second.Line != 2 {
		t.Fatalf("read = %v, want the second session header refused at line 2", err)
	}
	sameEvents(t, got, []event.Event{event.NewSession(testHeader()), everyKind(t0)[0]})
}

func TestFutureVersionRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		header fileHeader
		want   []string
	}{
		{"schema", fileHeader{Magic: fileMagic, Format: FormatVersion, Schema: event.SchemaVersion + 1}, []string{"schema version 2", "reads version 1"}},
		{"format", fileHeader{Magic: fileMagic, Format: FormatVersion + 1, Schema: event.SchemaVersion}, []string{"format is version 2", "reads version 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := buildRecording(t, everyKind(t0)[:2])
			skip := rec.frames[0]
			data := appendHeaderFrame(nil, tc.header)
			data = append(data, rec.data[skip:]...)
			_, err := readAll(data)
			if !errors.Is(err, ErrVersion) {
				t.Fatalf("got %v, want ErrVersion", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestNotARecording(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"empty":                 nil,
		"json lines":            []byte(`{"v":1,"kind":"marker"}` + "\n"),
		"other skippable frame": appendHeaderFrame(nil, fileHeader{Magic: "something-else", Format: 1, Schema: 1}),
	} {
		if _, err := readAll(data); !errors.Is(err, ErrNotRecording) {
			t.Errorf("%s: got %v, want ErrNotRecording", name, err)
		}
	}
}

// TestZstdcatReadsIt checks that standard tools read a recording: the header
// frame is skipped and the rest is JSON Lines.
func TestZstdcatReadsIt(t *testing.T) {
	t.Parallel()
	zstd, err := exec.LookPath("zstd")
	if err != nil {
		t.Skip("zstd is not installed")
	}
	rec := buildRecording(t, everyKind(t0)[:3], everyKind(t0)[3:])
	path := filepath.Join(t.TempDir(), "s.jsonl.zst")
	if err := os.WriteFile(path, rec.data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(zstd, "-dc", path).Output()
	if err != nil {
		t.Fatalf("zstd -dc: %v", err)
	}
	var got []event.Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, event.MaxLineBytes)
	for sc.Scan() {
		ev, err := event.Unmarshal(sc.Bytes())
		if err != nil {
			t.Fatalf("zstd output line %q: %v", sc.Text(), err)
		}
		got = append(got, ev)
	}
	sameEvents(t, got, rec.all())
}

// TestRecordFlushesEveryInterval drives Record with a clock the test moves:
// an event waits in memory until the interval is up, then is on disk.
func TestRecordFlushesEveryInterval(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.jsonl.zst")
	clock := newManualClock()
	w, err := Create(path, testHeader(), Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.Event)
	done := make(chan error, 1)
	go func() { done <- w.Record(context.Background(), events) }()

	if d := <-clock.armed; d != DefaultFlushInterval {
		t.Fatalf("Record waits %v between flushes, want %v", d, DefaultFlushInterval)
	}
	ev := everyKind(t0)[0]
	events <- ev // Record holds it in memory, not yet on disk
	if got, err := readAll(mustRead(t, path+".partial")); err != nil || len(got) != 1 {
		t.Fatalf("before the interval: read %d events (%v), want the header alone", len(got), err)
	}

	clock.Advance(DefaultFlushInterval)
	<-clock.armed // Record flushed, then armed the next interval
	got, err := readAll(mustRead(t, path+".partial"))
	if err != nil {
		t.Fatalf("after the interval: %v", err)
	}
	sameEvents(t, got, []event.Event{event.NewSession(testHeader()), ev})
	if st := w.Stats(); st.Events != 2 || st.Frames != 2 || st.Bytes != int64(len(mustRead(t, path+".partial"))) || st.Behind {
		t.Errorf("Stats = %+v, want 2 events in 2 frames, Bytes the file size, not behind", st)
	}

	close(events)
	if err := <-done; err != nil {
		t.Fatalf("Record: %v", err)
	}
}

func TestRecordDrainsBufferedEventsWhenCancelled(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), Options{Clock: newManualClock()})
	if err != nil {
		t.Fatal(err)
	}
	evs := everyKind(t0)
	events := make(chan event.Event, len(evs))
	for _, ev := range evs {
		events <- ev
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Record(ctx, events); !errors.Is(err, context.Canceled) {
		t.Fatalf("Record = %v, want context.Canceled", err)
	}
	got, err := readAll(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, append([]event.Event{event.NewSession(testHeader())}, evs...))
}

// failingWriter accepts the header, then fails.
type failingWriter struct {
	bytes.Buffer
	writes int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	f.writes++
	if f.writes > 1 {
		return 0, errors.New("no space left on device")
	}
	return f.Buffer.Write(p)
}

func TestWriteFailureIsCountedAndReported(t *testing.T) {
	t.Parallel()
	w, err := NewWriter(&failingWriter{}, testHeader(), Options{Clock: newManualClock()})
	if err != nil {
		t.Fatal(err)
	}
	evs := everyKind(t0)
	events := make(chan event.Event, len(evs))
	for _, ev := range evs {
		events <- ev
	}
	close(events)
	err = w.Record(context.Background(), events)
	if err == nil || !strings.Contains(err.Error(), "no space left") || !strings.Contains(err.Error(), fmt.Sprintf("%d events not recorded", len(evs))) {
		t.Fatalf("Record = %v, want the write error and the count of events lost", err)
	}
	if st := w.Stats(); st.Unwritten != int64(len(evs)) || st.Err == nil {
		t.Errorf("Stats = %+v, want %d unwritten and the error", st, len(evs))
	}
}

func TestInvalidEventRejected(t *testing.T) {
	t.Parallel()
	w, err := NewWriter(&bytes.Buffer{}, testHeader(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(event.Event{Kind: event.KindRequest}); err == nil {
		t.Fatal("Write accepted a request event without its payload")
	}
	if err := w.Write(everyKind(t0)[0]); err != nil {
		t.Fatalf("a valid event after an invalid one: %v", err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "1 events not recorded") {
		t.Errorf("Close = %v, want it to report the rejected event", err)
	}
}

func TestBehindWhenAWriteTakesLongerThanTheInterval(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	slow := writerFunc(func(p []byte) (int, error) {
		clock.Advance(2 * time.Second) // the disk takes two seconds
		return len(p), nil
	})
	w, err := NewWriter(slow, testHeader(), Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(everyKind(t0)[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); !st.Behind || st.LastWrite != 2*time.Second || st.WriteTime != 4*time.Second {
		t.Errorf("Stats = %+v, want behind, last write 2s, 4s in all", st)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestFramesHoldMarshalLines checks the content byte for byte: a plain zstd
// stream decoder, which skips the header frame, yields event.Marshal's lines.
func TestFramesHoldMarshalLines(t *testing.T) {
	t.Parallel()
	rec := smallRecording(t)
	var want bytes.Buffer
	for _, ev := range rec.all() {
		line, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(append(line, '\n'))
	}
	dec, err := zstd.NewReader(bytes.NewReader(rec.data))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	got, err := io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("decompressed content differs from event.Marshal's lines:\n got %s\nwant %s", got, want.Bytes())
	}
}

// A stream that starts a new session (an agent that restarted) ends the
// recording at the new header, which RecordSession returns, and leaves
// the events after it for the next file.
func TestRecordSessionEndsAtANewSession(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.jsonl.zst")
	w, err := Create(path, testHeader(), Options{Clock: newManualClock()})
	if err != nil {
		t.Fatal(err)
	}
	evs := everyKind(t0)
	restarted := testHeader()
	restarted.Time = restarted.Time.Add(time.Hour)
	events := make(chan event.Event, len(evs)+3)
	events <- event.NewSession(testHeader()) // the same header again: not a new session
	for _, ev := range evs[1:] {
		events <- ev
	}
	events <- event.NewSession(restarted)
	after := evs[len(evs)-1]
	events <- after
	close(events)
	next, err := w.RecordSession(context.Background(), events)
	if err != nil || next == nil || !next.Time.Equal(restarted.Time) {
		t.Fatalf("RecordSession = %v, %v: want the restarted session's header", next, err)
	}
	got, err := readAll(mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, append([]event.Event{event.NewSession(testHeader())}, evs[1:]...))
	if ev, ok := <-events; !ok || !reflect.DeepEqual(ev, after) {
		t.Errorf("the event after the new header was taken: %v, %v", ev, ok)
	}
}
