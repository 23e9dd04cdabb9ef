//go:build unix

package fileread

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostile returns paths that must be refused, and the kind each error names.
func hostile(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return map[string]string{
		"/dev/zero": "a character device",
		fifo:        "a FIFO (named pipe)",
		dir:         "a directory",
		sock:        "a socket",
	}
}

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	for path, kind := range hostile(t) {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(path, Limit{Flag: "--ca-cert", Max: MiB}); done <- err }()
		select {
		case err := <-done:
			want := "--ca-cert " + path + ": not a regular file (" + kind + ")"
			if !errors.Is(err, ErrNotRegular) || err.Error() != want {
				t.Errorf("%s: got %v, want %q", path, err, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: ReadFile did not return", path)
		}
	}
}

func TestOpenRefusesAFileOverItsLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.pem")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 2 GiB that take no disk.
	if err := f.Truncate(2 * GiB); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ReadFile(path, Limit{Flag: "--tls-cert", Max: MiB, What: "a certificate"})
	want := "--tls-cert " + path + ": 2 GiB is over the 1 MiB limit for a certificate"
	if !errors.Is(err, ErrTooLarge) || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestLimitHoldsWhileReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := Open(path, Limit{Max: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The file grows past the limit after the check.
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	if !errors.Is(err, ErrTooLarge) || len(b) != 20 || !strings.Contains(err.Error(), "grew past the 20 B limit") {
		t.Fatalf("read %d bytes, %v; want 20 and the limit", len(b), err)
	}
	// Exactly at the limit is fine.
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 20)), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(path, Limit{Max: 20}); err != nil || len(b) != 20 {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := ReadFile("/nonexistent/x", Limit{Flag: "--prompt-file", Max: MiB})
	if !errors.Is(err, os.ErrNotExist) || err.Error() != "--prompt-file /nonexistent/x: no such file or directory" {
		t.Fatalf("got %v", err)
	}
}

func TestStreamReadsAndCancels(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s := Stream(ctx, pr)
	go pw.Write([]byte("hello"))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	// Now the pipe is silent: a read blocks until ctx ends.
	done := make(chan error, 1)
	go func() { _, err := s.Read(buf); done <- err }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a blocked read did not return when ctx ended")
	}
}

func TestStreamEOF(t *testing.T) {
	s := Stream(context.Background(), strings.NewReader(strings.Repeat("ab", 100000)))
	b, err := io.ReadAll(s)
	if err != nil || len(b) != 200000 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", KiB: "1 KiB", MiB: "1 MiB", 3 * GiB / 2: "1.5 GiB", 2 * GiB: "2 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestStreamCloseStopsReading: a reader that stops early does not leave the
// goroutine reading: Close closes the input, so its writer sees the end.
func TestStreamCloseStopsReading(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	s := Stream(context.Background(), pr)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for err == nil { // fills the pipe if nobody closed its reading end
			_, err = pw.Write(make([]byte, 64*KiB))
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("the writer got %v, want EPIPE", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not close the input")
	}
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after Close: %v", err)
	}
}
