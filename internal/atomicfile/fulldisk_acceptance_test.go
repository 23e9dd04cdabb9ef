//go:build acceptance

package atomicfile_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/latscope/latscope/internal/atomicfile"
)

// fullDisk mounts a 2 MiB tmpfs for the test and returns its path; it
// skips where mounting is not allowed (it needs root).
func fullDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("a real full disk needs a tmpfs, and mounting one needs root: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// TestFullDiskLeavesNothing: on a real disk that fills, a report written
// whole leaves neither a part of itself nor a temporary file, and an old
// report it was to replace is as it was; the space is free again.
func TestFullDiskLeavesNothing(t *testing.T) {
	dir := fullDisk(t)
	old := filepath.Join(dir, "x.html")
	if err := os.WriteFile(old, []byte("old report"), 0o644); err != nil {
		t.Fatal(err)
	}
	free := freeBytes(t, dir)
	big := bytes.Repeat([]byte("latscope "), 3<<20/9)
	for _, tc := range []struct {
		target    string
		overwrite bool
	}{{old, true}, {filepath.Join(dir, "x.csv"), false}} {
		err := atomicfile.WriteFile(tc.target, big, atomicfile.Options{Overwrite: tc.overwrite})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("WriteFile(%s) of 3 MiB onto 2 MiB: %v, want ENOSPC", filepath.Base(tc.target), err)
		}
	}
	assertContent(t, old, "old report")
	assertOnly(t, dir, "x.html")
	if got := freeBytes(t, dir); got != free {
		t.Errorf("%d bytes free after the failures, %d before", got, free)
	}
}

// TestFullDiskStream: a stream that hits the full disk cuts off its torn
// write and commits what it wrote whole; an aborted one leaves nothing.
func TestFullDiskStream(t *testing.T) {
	dir := fullDisk(t)
	target := filepath.Join(dir, "run.lsr")
	f, err := atomicfile.CreateStream(target, atomicfile.Options{Perm: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	frame := bytes.Repeat([]byte("f"), 300<<10)
	var good int64
	for {
		n, err := f.Write(frame)
		if err == nil {
			good += int64(n)
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write: %v, want ENOSPC", err)
		}
		break
	}
	if err := f.Truncate(good); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(target); err != nil || info.Size() != good || good == 0 {
		t.Fatalf("the committed stream: %v, %v; want %d bytes", info, err, good)
	}
	assertOnly(t, dir, "run.lsr")
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}

	f, err = atomicfile.CreateStream(target, atomicfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(frame)
	}
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, dir)
}
