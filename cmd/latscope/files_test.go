//go:build unix

package main

// Every file flag given something that is not a readable file of a sane
// size: a device that never ends, a FIFO nobody writes, a directory, a
// sparse file of 2 GiB. Each must fail at once with an error naming the flag
// and what is wrong, without reading on or blocking.

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/internal/testutil"
	"github.com/latscope/latscope/internal/textsafe"
)

// hostileFiles makes a FIFO, a directory and a sparse 2 GiB file in dir.
func hostileFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil { // sparse: no disk, no time
		t.Fatal(err)
	}
	f.Close()
	return map[string]string{"zero": "/dev/zero", "fifo": fifo, "dir": sub, "sparse": sparse}
}

// executeIn is executeCtx with stdin.
func executeIn(t *testing.T, ctx context.Context, stdin io.Reader, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr testutil.SyncBuffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	// As main does: what is written is escaped for the terminal.
	out, errOut := textsafe.NewShared(&stdout), textsafe.NewShared(&stderr)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	_, _ = out.Flush(), errOut.Flush()
	return stdout.String(), stderr.String(), err
}

// returnsWithin runs f and fails the test if it has not returned by the
// deadline, which is generous: the point is that it returns, not how fast.
func returnsWithin(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
		return nil
	}
}

func TestFileFlagsRefuseHostileFiles(t *testing.T) {
	dir := t.TempDir()
	files := hostileFiles(t, dir)
	junk := filepath.Join(dir, "junk.pem") // a small regular file: the other half of a key pair
	if err := os.WriteFile(junk, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := testutil.TinyRecording(t, dir, "base.lsr")
	const noServer = "http://127.0.0.1:1"
	// want says what each kind of file must be refused as.
	want := map[string]string{
		"zero": "not a regular file (a character device)", "fifo": "not a regular file (a FIFO (named pipe))",
		"dir": "not a regular file (a directory)",
	}
	for _, tc := range []struct {
		name   string
		args   func(path string) []string
		flag   string // the error names it, with the path
		sparse string // what a 2 GiB file is refused as
	}{
		{"run --ca-cert", func(p string) []string { return []string{"run", "--url", noServer, "--ca-cert", p} },
			"--ca-cert", "2 GiB is over the 1 MiB limit for a certificate"},
		{"run --prompt-file", func(p string) []string {
			return []string{"run", "--url", noServer, "--dialect", "tgi", "--prompt-file", p}
		}, "--prompt-file", "2 GiB is over the 64 MiB limit for a prompt file"},
		{"run --trace", func(p string) []string { return []string{"run", "--url", noServer, "--trace", p} },
			"--trace: trace", "2 GiB is over the 1 GiB limit for a text trace"},
		{"agent --tls-cert", func(p string) []string {
			return []string{"agent", "--url", noServer, "--listen", "127.0.0.1:0", "--tls-cert", p, "--tls-key", junk}
		}, "--tls-cert", "2 GiB is over the 1 MiB limit for a certificate"},
		{"agent --tls-key", func(p string) []string {
			return []string{"agent", "--url", noServer, "--listen", "127.0.0.1:0", "--tls-cert", junk, "--tls-key", p}
		}, "--tls-key", "2 GiB is over the 1 MiB limit for a key"},
		{"attach --ca-cert", func(p string) []string { return []string{"attach", noServer, "--ca-cert", p, "--no-tui"} },
			"--ca-cert", "2 GiB is over the 1 MiB limit for a certificate"},
		{"attach --agents", func(p string) []string { return []string{"attach", "--agents", p, "--no-tui"} },
			"--agents", "2 GiB is over the 1 MiB limit for a list of agents"},
		{"replay", func(p string) []string { return []string{"replay", p, "--no-tui"} },
			"", "not a latscope recording"},
		{"report", func(p string) []string { return []string{"report", p} },
			"", "not a latscope recording"},
		{"report --compare", func(p string) []string { return []string{"report", rec, "--compare", p} },
			"", "not a latscope recording"},
	} {
		for kind, path := range files {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				start := time.Now()
				var err error
				returnsWithin(t, 20*time.Second, "latscope "+tc.name+" "+kind, func() error {
					_, _, err = execute(t, tc.args(path)...)
					return nil
				})
				took := time.Since(start)
				w := want[kind]
				if kind == "sparse" {
					w = tc.sparse
				}
				if err == nil || !strings.Contains(err.Error(), w) || !strings.Contains(err.Error(), strings.TrimSpace(tc.flag+" "+path)) {
					t.Fatalf("err = %v, want it to name %q and say %q", err, strings.TrimSpace(tc.flag+" "+path), w)
				}
				t.Logf("%v: %v", took.Round(time.Millisecond), err)
			})
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapSys > 512<<20 {
		t.Errorf("the heap grew to %d MiB: something was read without bound", ms.HeapSys>>20)
	}
}

// TestRecordRefusesDevNull: --record /dev/null is refused before anything
// is opened, with or without --record-overwrite, and /dev/null's mode is
// what it was (a chmod to 0600 would lock every other user out of it).
func TestRecordRefusesDevNull(t *testing.T) {
	before, err := os.Stat("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--record-overwrite"}} {
		args := append([]string{"run", "--url", serveTinySim(t), "--no-tui", "-n", "1", "--no-gpu", "--record", "/dev/null"}, extra...)
		_, _, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--record: /dev/null: not a regular file (a character device)") {
			t.Errorf("latscope %s: err = %v, want a refusal", strings.Join(args, " "), err)
		}
	}
	after, err := os.Stat("/dev/null")
	if err != nil || after.Mode() != before.Mode() {
		t.Fatalf("/dev/null was %v, is %v (%v)", before.Mode(), after.Mode(), err)
	}
}

// TestReplayAndReportFromAPipe: "-" reads the recording from standard input.
func TestReplayAndReportFromAPipe(t *testing.T) {
	dir := t.TempDir()
	rec := testutil.TinyRecording(t, dir, "a.lsr")
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, _, err := execute(t, "replay", rec, "--no-tui")
	if err != nil {
		t.Fatal(err)
	}
	fromFileReport, _, err := execute(t, "report", rec, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "-", "--no-tui"}, fromFile},
		{[]string{"report", "-", "--format", "csv"}, fromFileReport},
	} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			pw.Write(data)
			pw.Close()
		}()
		var stdout string
		returnsWithin(t, 20*time.Second, strings.Join(tc.args, " "), func() error {
			stdout, _, err = executeIn(t, context.Background(), pr, tc.args...)
			return nil
		})
		pr.Close()
		if err != nil {
			t.Fatalf("latscope %s: %v", strings.Join(tc.args, " "), err)
		}
		if stdout != tc.want {
			t.Errorf("latscope %s printed\n%s\nwant what the file gave:\n%s", strings.Join(tc.args, " "), stdout, tc.want)
		}
	}
	// /dev/zero on standard input is not a recording, found at its first
	// bytes, not after reading it all.
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	returnsWithin(t, 20*time.Second, "replay - < /dev/zero", func() error {
		_, _, err = executeIn(t, context.Background(), zero, "replay", "-", "--no-tui")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "standard input: not a latscope recording") {
		t.Errorf("replay - < /dev/zero: %v", err)
	}
}

// TestReadingAPipeIsCancelled: a pipe that stays open and silent does not
// keep replay or report from returning when the context ends (SIGINT,
// SIGTERM).
func TestReadingAPipeIsCancelled(t *testing.T) {
	for _, args := range [][]string{{"replay", "-", "--no-tui"}, {"report", "-"}} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		err = returnsWithin(t, 20*time.Second, strings.Join(args, " ")+" on a silent pipe", func() error {
			_, _, err := executeIn(t, ctx, pr, args...)
			return err
		})
		t.Logf("%s: returned %v after the cancel", strings.Join(args, " "), time.Since(start).Round(time.Millisecond)-100*time.Millisecond)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitInterrupted {
			t.Errorf("latscope %s: err = %v, want exit %d", strings.Join(args, " "), err, exitInterrupted)
		}
		pw.Close()
		pr.Close()
		cancel()
	}
}

// TestJoinedRecordingsAreRefused: two recordings joined with cat are not
// summed as one session; the error names where the second begins.
func TestJoinedRecordingsAreRefused(t *testing.T) {
	dir := t.TempDir()
	a, b := testutil.TinyRecording(t, dir, "a.lsr"), testutil.TinyRecording(t, dir, "b.lsr")
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	joined := filepath.Join(dir, "joined.lsr")
	if err := os.WriteFile(joined, append(da, db...), 0o600); err != nil {
		t.Fatal(err)
	}
	offset := "a second recording begins at byte offset " + strconv.Itoa(len(da))
	for _, args := range [][]string{{"replay", joined, "--no-tui"}, {"report", joined}, {"report", a, "--compare", joined}} {
		stdout, _, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), offset) {
			t.Errorf("latscope %s: err = %v, want it to say %q", strings.Join(args, " "), err, offset)
		}
		if stdout != "" {
			t.Errorf("latscope %s printed a summary of two sessions as one:\n%s", strings.Join(args, " "), stdout)
		}
	}
}

// TestPartialRecordingReportsSaySo: a recording cut short says it is
// partial in every format.
func TestPartialRecordingReportsSaySo(t *testing.T) {
	dir := t.TempDir()
	rec := testutil.TinyRecording(t, dir, "cut.lsr")
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, b[:len(b)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	for format, want := range map[string]string{
		"md": "partial recording", "html": "partial recording", "json": `"partial": true`, "csv": "recording,partial,value,1,bool",
	} {
		stdout, _, err := execute(t, "report", rec, "--format", format)
		if err != nil {
			t.Fatalf("--format %s: %v", format, err)
		}
		if !strings.Contains(stdout, want) {
			t.Errorf("--format %s does not say the recording is partial (%q)", format, want)
		}
	}
}

// TestReportOfAFileIsCancelled: report reads a large file twice; it stops
// when the context ends instead of reading on.
func TestReportOfAFileIsCancelled(t *testing.T) {
	rec := testutil.TinyRecording(t, t.TempDir(), "a.lsr")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{"report", rec}, {"report", rec, "--compare", rec}} {
		_, _, err := executeCtx(t, ctx, args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitInterrupted || !errors.Is(err, context.Canceled) {
			t.Errorf("latscope %s, cancelled: err = %v, want exit %d", strings.Join(args, " "), err, exitInterrupted)
		}
	}
}
