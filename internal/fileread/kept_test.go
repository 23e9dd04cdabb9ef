//go:build unix

package fileread

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestKeptReadsCurrentContents: each Read gives the whole file as it is
// now, shorter or longer than before, past the first buffer's size.
func TestKeptReadsCurrentContents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	k := Keep(path, Limit{Max: MiB, What: "a /proc file"})
	defer k.Close()
	for _, want := range [][]byte{
		[]byte("cpu 1 2 3\n"),
		bytes.Repeat([]byte("intr 0 0 0 0\n"), 1000), // 13 KB: the buffer grows
		[]byte("short\n"),
		{},
	} {
		if err := os.WriteFile(path, want, 0o644); err != nil { // in place, as the kernel's files change
			t.Fatal(err)
		}
		got, err := k.Read()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(want))
		}
	}
}

// TestKeptRetriesAMissingFile: a file missing at one Read is opened at a
// later one, once it is there.
func TestKeptRetriesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu")
	k := Keep(path, Limit{Max: KiB})
	defer k.Close()
	if _, err := k.Read(); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("some avg10=1.00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Read(); err != nil || string(got) != "some avg10=1.00\n" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestKeptRefuses: what is not a regular file is never opened, and a file
// past the limit is an error that says so, not a truncated read.
func TestKeptRefuses(t *testing.T) {
	for path, kind := range hostile(t) {
		k := Keep(path, Limit{Max: KiB})
		if _, err := k.Read(); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s: %v", path, err)
		}
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 10*KiB), 0o644); err != nil {
		t.Fatal(err)
	}
	k := Keep(big, Limit{Max: 8 * KiB, What: "a /proc file"})
	defer k.Close()
	if _, err := k.Read(); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "8 KiB limit for a /proc file") {
		t.Fatalf("over the limit: %v", err)
	}
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 8*KiB), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Read(); err != nil || len(got) != 8*KiB {
		t.Fatalf("at the limit: %d bytes, %v", len(got), err)
	}
}

// TestKeptProcFile: a real /proc file read again gives the kernel's
// contents anew: /proc/self/io counts the bytes this process has read, the
// previous read's included.
func TestKeptProcFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no /proc/self/io on " + runtime.GOOS)
	}
	k := Keep("/proc/self/io", Limit{Max: MiB})
	defer k.Close()
	first, err := k.Read()
	if err != nil {
		t.Fatal(err)
	}
	first = bytes.Clone(first)
	second, err := k.Read()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, second) || !bytes.HasPrefix(second, []byte("rchar: ")) {
		t.Fatalf("read again: %q, before %q", second, first)
	}
}
