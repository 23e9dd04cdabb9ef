package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/recorder"
)

// stdinName is what messages and reports call a recording read from
// standard input.
const stdinName = "standard input"

// recordingArg resolves the FILE argument of replay and report: the path to
// read, the name to show, and what to call when done with it.
//
// A path is read where it is (recorder.Open refuses anything but a regular
// file). "-", or /dev/stdin when it is not a regular file, is standard
// input, which cannot be read twice while both commands read a recording
// more than once (report's two passes, the dashboard's seeks); so it is
// copied to a temporary file, removed by cleanup, as it is read. It is
// checked frame by frame as it comes, so what is not a recording (say
// /dev/zero) is refused at its first bytes, and the copy stops when ctx
// ends, even while a read is blocked on a silent pipe.
func recordingArg(ctx context.Context, in io.Reader, arg string) (path, name string, cleanup func(), err error) {
	nothing := func() {}
	if !fileread.IsStdin(arg) {
		return arg, arg, nothing, nil
	}
	if arg != "-" {
		if info, err := os.Stat(arg); err == nil && info.Mode().IsRegular() {
			return arg, arg, nothing, nil // redirected from a file: read it in place
		}
	}
	tmp, err := os.CreateTemp("", "latscope-stdin-*.lsr")
	if err != nil {
		return "", "", nothing, fmt.Errorf("%s: copy the recording: %w", stdinName, err)
	}
	path, cleanup = unlinkedPath(tmp)
	if err := copyRecording(ctx, tmp, in); err != nil {
		cleanup()
		return "", "", nothing, err
	}
	return path, stdinName, cleanup, nil
}

// unlinkedPath removes the temporary file's name at once where the system
// can still open it by its descriptor (Linux's /proc/self/fd), so that no
// copy is left behind however the process ends (a SIGPIPE from a closed
// stdout kills it before any cleanup). Elsewhere cleanup removes it.
func unlinkedPath(tmp *os.File) (path string, cleanup func()) {
	byFD := fmt.Sprintf("/proc/self/fd/%d", tmp.Fd())
	a, err1 := os.Stat(byFD)
	b, err2 := tmp.Stat()
	if err1 == nil && err2 == nil && os.SameFile(a, b) && os.Remove(tmp.Name()) == nil {
		return byFD, func() { tmp.Close() }
	}
	return tmp.Name(), func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
}

// copyRecording copies a recording from in to out, reading it as it goes
// so that anything that is not a recording stops the copy at once. A
// recording damaged further on is copied up to the damage, which the
// command's own reading then reports with its offset.
func copyRecording(ctx context.Context, out io.Writer, in io.Reader) error {
	// A context of its own: reading stops when the copy does, and a stop on
	// purpose is not an interruption.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	rd, err := recorder.NewReader(io.TeeReader(fileread.Stream(sctx, in), out))
	if err == nil {
		for err == nil {
			_, err = rd.Next()
		}
		rd.Close()
		var torn *recorder.TornTailError
		var corrupt *recorder.CorruptError
		var joined *recorder.JoinedError
		if errors.Is(err, io.EOF) || errors.As(err, &torn) || errors.As(err, &corrupt) || errors.As(err, &joined) {
			err = nil
		}
	}
	switch {
	case ctx.Err() != nil:
		return Exit(Interrupted, fmt.Errorf("interrupted while reading the recording from %s", stdinName))
	case err != nil:
		return fmt.Errorf("%s: %w", stdinName, err)
	}
	return nil
}
