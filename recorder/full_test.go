package recorder

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// fullDisk is a disk with room for so many bytes: a write that does not
// fit writes what fits (partial) or nothing, and fails with ENOSPC, as a
// full filesystem does.
type fullDisk struct {
	bytes.Buffer
	room    int
	partial bool
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) <= d.room {
		d.room -= len(p)
		return d.Buffer.Write(p)
	}
	n := 0
	if d.partial {
		n, _ = d.Buffer.Write(p[:d.room])
		d.room = 0
	}
	return n, &os.PathError{Op: "write", Path: "rec", Err: syscall.ENOSPC}
}

// frameOf writes evs as one frame and returns whether it was written.
func frameOf(t *testing.T, w *Writer, evs []event.Event) bool {
	t.Helper()
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	return w.Flush() == nil
}

// A frame that does not fit is dropped and counted, nothing of it is left
// in the file, and frames after the disk got room again are recorded: the
// file reads to its end.
func TestFullDiskDropsTheFrameAndGoesOn(t *testing.T) {
	t.Parallel()
	disk := &fullDisk{room: 1 << 20}
	w, err := NewWriter(disk, testHeader(), Options{Clock: newManualClock()})
	if err != nil {
		t.Fatal(err)
	}
	first, dropped, last := everyKind(t0), everyKind(t0.Add(time.Minute)), everyKind(t0.Add(2*time.Minute))
	if !frameOf(t, w, first) {
		t.Fatal("the first frame failed with room on the disk")
	}
	disk.room = 0
	select {
	case <-w.Failed():
		t.Fatal("Failed signalled before any failure")
	default:
	}
	if frameOf(t, w, dropped) {
		t.Fatal("a frame was written to a full disk")
	}
	<-w.Failed() // signalled at the failure, so a watcher hears it at once
	st := w.Stats()
	if st.Unwritten != int64(len(dropped)) || !errors.Is(st.Err, syscall.ENOSPC) || st.Broken {
		t.Fatalf("Stats = %+v, want %d unwritten, ENOSPC, not broken", st, len(dropped))
	}
	disk.room = 1 << 20
	if !frameOf(t, w, last) {
		t.Fatal("the frame after the disk got room failed")
	}
	err = w.Close()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d events not recorded", len(dropped))) {
		t.Fatalf("Close = %v, want the count of events not recorded", err)
	}
	got, err := readAll(disk.Bytes())
	if err != nil {
		t.Fatalf("the file does not read to its end: %v", err)
	}
	want := append(append([]event.Event{event.NewSession(testHeader())}, first...), last...)
	sameEvents(t, got, want)
}

// A writer that took part of a frame cannot give it back: the file is
// torn there, so nothing more is appended and every later event counts.
func TestPartialWriteBreaksAWriterThatCannotCutBack(t *testing.T) {
	t.Parallel()
	disk := &fullDisk{room: 1 << 20, partial: true}
	w, err := NewWriter(disk, testHeader(), Options{Clock: newManualClock()})
	if err != nil {
		t.Fatal(err)
	}
	evs := everyKind(t0)
	frameOf(t, w, evs)
	disk.room = 10
	if frameOf(t, w, evs) {
		t.Fatal("a frame was written past the disk's room")
	}
	disk.room = 1 << 20
	for _, ev := range evs {
		_ = w.Write(ev)
	}
	st := w.Stats()
	if !st.Broken || st.Unwritten != 2*int64(len(evs)) {
		t.Fatalf("Stats = %+v, want broken and %d unwritten", st, 2*len(evs))
	}
	_ = w.Close()
	if got := w.Stats().Unwritten; got != 2*int64(len(evs)) {
		t.Errorf("after Close %d unwritten, want %d", got, 2*len(evs))
	}
}

// On a real filesystem that fills up (a 64 KiB tmpfs), a frame the disk
// took only part of is cut off again, so the file reads to its end, and
// recording resumes once there is room. Mounting needs root.
func TestRealFullFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	// Filler takes most of the room, so the recording fills the rest soon
	// and the space can be given back.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 40<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rec.lsr")
	w, err := Create(path, testHeader(), Options{Clock: newManualClock()})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var written []event.Event
	seq := uint64(0)
	batch := func() []event.Event {
		var evs []event.Event
		for range 20 {
			seq++
			evs = append(evs, event.NewRequest(realisticRequest(rng, t0, seq)))
		}
		return evs
	}
	failedAt := 0
	for i := 0; i < 1000 && failedAt == 0; i++ {
		evs := batch()
		if frameOf(t, w, evs) {
			written = append(written, evs...)
		} else {
			failedAt = i
		}
	}
	st := w.Stats()
	if failedAt == 0 || !errors.Is(st.Err, syscall.ENOSPC) || st.Broken {
		t.Fatalf("Stats = %+v: want an ENOSPC failure the writer recovered from", st)
	}
	partial := path + ".partial"
	if fi, err := os.Stat(partial); err != nil || fi.Size() != st.Bytes {
		t.Fatalf("file size %v (%v), want %d: the torn frame was not cut off", fi.Size(), err, st.Bytes)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	evs := batch()
	if !frameOf(t, w, evs) {
		t.Fatalf("no frame written after the disk got room: %v", w.Stats().Err)
	}
	written = append(written, evs...)
	// While it is written, the partial file reads to its end.
	data, err := os.ReadFile(partial)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(data)
	if err != nil {
		t.Fatalf("the partial file does not read to its end: %v", err)
	}
	sameEvents(t, got, append([]event.Event{event.NewSession(testHeader())}, written...))
	// A recording that lacks a stretch of the run is not kept.
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "20 events not recorded") || !strings.Contains(err.Error(), "no recording is kept") {
		t.Fatalf("Close = %v, want 20 events not recorded and no recording kept", err)
	}
	for _, p := range []string{path, partial} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after a failed recording: %v, want it absent", filepath.Base(p), err)
		}
	}
}
