package atomicfile_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/latscope/latscope/internal/atomicfile"
)

// TestStreamIsReadableWhileWritten: a stream grows under target.partial,
// which a reader opens and reads while it is written; Commit renames it,
// and the reader that had it open reads on to the end.
func TestStreamIsReadableWhileWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "run.lsr")
	f, err := atomicfile.CreateStream(target, atomicfile.Options{Perm: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if f.Name() != target+atomicfile.PartialSuffix {
		t.Fatalf("Name %q, want %q", f.Name(), target+atomicfile.PartialSuffix)
	}
	io.WriteString(f, "frame 1\n")
	r, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, 64)
	if n, _ := r.Read(got); string(got[:n]) != "frame 1\n" {
		t.Fatalf("a reader of the partial file read %q", got[:n])
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the target exists before Commit: %v", err)
	}
	io.WriteString(f, "frame 2\n")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Read(got); string(got[:n]) != "frame 2\n" {
		t.Errorf("the open reader read %q after Commit, want the rest", got[:n])
	}
	assertContent(t, target, "frame 1\nframe 2\n")
	assertOnly(t, dir, "run.lsr")
	if got, want := mode(t, target), umasked(t, 0o600); got != want {
		t.Errorf("mode %v, want %v", got, want)
	}
}

// TestStreamGoesOnAfterAFailedWrite: a stream's failed write is not final:
// the writer cuts off the torn part and later writes land, and Commit puts
// what is there in place.
func TestStreamGoesOnAfterAFailedWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "run.lsr")
	f, err := atomicfile.CreateStream(target, atomicfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "good 1\n")
	atomicfile.FailWrites(f, 3, syscall.ENOSPC)
	if n, err := io.WriteString(f, "torn frame\n"); n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the failing write: %d, %v", n, err)
	}
	if err := f.Truncate(7); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	atomicfile.HealWrites(f)
	io.WriteString(f, "good 2\n")
	if info, err := f.Stat(); err != nil || info.Size() != 14 {
		t.Fatalf("Stat: %v, %v", info, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	assertContent(t, target, "good 1\ngood 2\n")
	assertOnly(t, dir, "run.lsr")
}

// TestStreamRefusesALeftPartialFile: a partial file from a crashed or
// running writer is the only copy of its run: never removed or reused,
// overwriting or not.
func TestStreamRefusesALeftPartialFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "run.lsr")
	partial := target + atomicfile.PartialSuffix
	if err := os.WriteFile(partial, []byte("crashed run"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, overwrite := range []bool{false, true} {
		_, err := atomicfile.CreateStream(target, atomicfile.Options{Overwrite: overwrite})
		if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), partial) {
			t.Errorf("CreateStream with %s there (overwrite %v): %v, want ErrExist naming it", partial, overwrite, err)
		}
	}
	assertContent(t, partial, "crashed run")
	assertOnly(t, dir, "run.lsr.partial")
}

// TestStreamKeepsItsDataWhenCommitFails: a stream whose target was taken
// meanwhile keeps the run under the partial name, says where, and a
// deferred Abort does not remove it.
func TestStreamKeepsItsDataWhenCommitFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "run.lsr")
	f, err := atomicfile.CreateStream(target, atomicfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "an hour of data")
	if err := os.WriteFile(target, []byte("another run"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = f.Commit()
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "kept at "+f.Name()) {
		t.Fatalf("Commit: %v, want ErrExist and where the data is", err)
	}
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	assertContent(t, target, "another run")
	assertContent(t, f.Name(), "an hour of data")
}

// TestStreamWhosePartialFileWasReplaced: if the partial name no longer is
// the file written, Commit says so and touches neither name.
func TestStreamWhosePartialFileWasReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "run.lsr")
	f, err := atomicfile.CreateStream(target, atomicfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "mine")
	if err := os.Remove(f.Name()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Name(), []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); !errors.Is(err, atomicfile.ErrReplaced) {
		t.Fatalf("Commit: %v, want ErrReplaced", err)
	}
	f.Abort()
	assertContent(t, f.Name(), "someone else's")
	assertOnly(t, dir, "run.lsr.partial")
}

// TestStreamOverwrites: with Overwrite the old file stays whole until the
// new run is committed, then is replaced, keeping its mode.
func TestStreamOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "run.lsr")
	if err := os.WriteFile(target, []byte("last run"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := atomicfile.CreateStream(target, atomicfile.Options{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateStream over an existing file: %v, want ErrExist", err)
	}
	f, err := atomicfile.CreateStream(target, atomicfile.Options{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "this run")
	assertContent(t, target, "last run")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	assertContent(t, target, "this run")
	assertOnly(t, dir, "run.lsr")
	if got := mode(t, target); got != 0o600 {
		t.Errorf("mode %v, want the old 0600", got)
	}
}
