//go:build unix

package recorder

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/internal/fileread"
)

// TestJoinedRecordingsRefused: two recordings joined as cat a b > c does are
// not read as one session; the error names where the second begins, after
// every event of the first.
func TestJoinedRecordingsRefused(t *testing.T) {
	t.Parallel()
	a, b := smallRecording(t), smallRecording(t)
	joined := append(append([]byte(nil), a.data...), b.data...)
	got, err := readAll(joined)
	var j *JoinedError
	if !errors.As(err, &j) || j.Offset != int64(len(a.data)) {
		t.Fatalf("got %v, want a JoinedError at offset %d", err, len(a.data))
	}
	sameEvents(t, got, a.all())
}

// TestOpenRefusesWhatIsNotAFile: a FIFO would block the open and a device
// never end; both are refused at once, saying which they are.
func TestOpenRefusesWhatIsNotAFile(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero", t.TempDir()} {
		done := make(chan error, 1)
		go func() {
			r, err := Open(path)
			if err == nil {
				r.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, fileread.ErrNotRegular) {
				t.Errorf("Open(%s) = %v, want it refused as not a regular file", path, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("Open(%s) did not return", path)
		}
	}
}

// TestOpenStreamsASparseFile: a 2 GiB file is read frame by frame; one of
// zeros is refused at its first bytes, without reading the rest.
func TestOpenStreamsASparseFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Open(path); !errors.Is(err, ErrNotRecording) {
		t.Fatalf("got %v, want ErrNotRecording", err)
	}
}

// TestCreateRefusesWhatIsNotAFile: --record /dev/null (or a FIFO, or a
// directory) is refused before anything is opened, so the device is neither
// truncated nor chmodded, overwrite or not.
func TestCreateRefusesWhatIsNotAFile(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dev/null", fifo, t.TempDir()} {
		before, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, overwrite := range []bool{false, true} {
			done := make(chan error, 1)
			go func() {
				w, err := Create(path, testHeader(), Options{Overwrite: overwrite})
				if err == nil {
					w.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, fileread.ErrNotRegular) {
					t.Errorf("Create(%s, overwrite %v) = %v, want it refused as not a regular file", path, overwrite, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Create(%s) did not return", path)
			}
		}
		after, err := os.Stat(path)
		if err != nil || after.Mode() != before.Mode() {
			t.Errorf("%s: mode %v before, %v after (%v)", path, before.Mode(), after.Mode(), err)
		}
	}
}

// A symbolic link where the recording goes is refused, even with
// overwriting allowed: the file it points to is left as it was.
func TestCreateRefusesASymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "rec.lsr")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, overwrite := range []bool{false, true} {
		w, err := Create(link, testHeader(), Options{Overwrite: overwrite})
		if err == nil {
			w.Close()
			t.Errorf("Create over a symlink (overwrite %v) succeeded", overwrite)
		} else if overwrite && !errors.Is(err, fileread.ErrNotRegular) {
			t.Errorf("Create over a symlink (overwrite %v) = %v, want it refused as not a regular file", overwrite, err)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep me" {
		t.Errorf("the link's target now holds %q (%v)", b, err)
	}
}
