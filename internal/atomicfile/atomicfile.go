// Package atomicfile writes a file whole or not at all. What is written
// goes to a temporary file in the target's directory; Commit syncs it and
// renames it to the target, so the target is either the old file or the
// whole new one, never a part. On a failure (a full disk) or Abort the
// temporary file is removed: nothing is left behind.
//
// Create is for a file written at once (a report): a failed write is
// remembered, and Commit then refuses and removes the temporary file.
// CreateStream is for a file written progressively over a run (a
// recording): it is written under the visible name target + ".partial",
// which a reader can open while the run goes on and a user finds after a
// crash; a failed write is the caller's to handle (it may cut the torn
// part off with Truncate and go on), and Commit renames whatever is there.
//
// The target is never a symbolic link, a directory, a device, a FIFO or a
// socket: those are refused even when overwriting is allowed, so a path
// such as /dev/null or a link planted in a shared directory cannot make a
// write land anywhere else.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/latscope/latscope/internal/fileread"
)

// PartialSuffix is added to a stream's target to name the file while it
// is written.
const PartialSuffix = ".partial"

// DefaultPerm is the mode of a new file when Options.Perm is zero, before
// the umask takes its bits away.
const DefaultPerm fs.FileMode = 0o644

// ErrSymlink is wrapped by the error for a target that is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link")

// ErrNotRegular is wrapped by the error for a target that exists and is
// neither a regular file nor a symbolic link. It is fileread's, so one
// errors.Is test covers a file refused for reading or for writing.
var ErrNotRegular = fileread.ErrNotRegular

// ErrReplaced is wrapped by Commit's error when a stream's partial file
// was removed or replaced by someone else while it was written.
var ErrReplaced = errors.New("the partial file was removed or replaced")

// Options configure Create and CreateStream. The zero value refuses to
// replace an existing file and makes new files 0644 less the umask.
type Options struct {
	// Overwrite lets the new file replace an existing regular file at the
	// target. A replaced file's permission bits (and, where the process
	// may set it, its owner) are given to the new one.
	Overwrite bool
	// Perm is the mode a new file is created with, before the umask; zero
	// means DefaultPerm. A recording is 0600: it may hold prompts.
	Perm fs.FileMode
}

// File is a file being written under a temporary name. Its methods belong
// to one goroutine.
type File struct {
	f      *os.File
	target string
	tmp    string
	opts   Options
	stream bool
	info   fs.FileInfo // the temporary file as created: Commit checks it is still there
	err    error       // Create only: the first failed write
	state  state
	// write is f.f.Write; tests replace it to fail as a full disk does
	// where they cannot fill one.
	write func([]byte) (int, error)
}

type state uint8

const (
	open state = iota
	committed
	aborted
	// kept is a stream whose Commit failed: its partial file is the run's
	// data, so nothing removes it.
	kept
)

// maxTempBase is the most of the target's name a temporary name repeats.
const maxTempBase = 200

// Create starts writing target: it checks the target may be written
// (absent, or a regular file with Options.Overwrite) and creates a hidden
// temporary file, ".<name>.<random>.tmp", in its directory. Call Commit to
// put the file in place, or Abort; `defer f.Abort()` after Create is
// harmless once Commit succeeded.
func Create(target string, opts Options) (*File, error) {
	if err := checkTarget(target, opts); err != nil {
		return nil, err
	}
	dir, base := filepath.Split(target)
	if len(base) > maxTempBase {
		base = base[:maxTempBase] // the temporary name must fit a file name's limit (255 bytes)
	}
	for range 10000 {
		tmp := filepath.Join(dir, "."+base+"."+strconv.FormatUint(uint64(rand.Uint32()), 36)+".tmp")
		f, err := newFile(target, tmp, opts, false)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("create %s: no free temporary name in its directory", target)
}

// CreateStream starts writing target progressively, under the name
// target + PartialSuffix, which a reader may open while it grows. It
// refuses if that name exists: another run may be writing it, or a run
// that crashed left it, and it is the only copy of that run's data, so it
// is never removed here (the message names it).
func CreateStream(target string, opts Options) (*File, error) {
	if err := checkTarget(target, opts); err != nil {
		return nil, err
	}
	f, err := newFile(target, target+PartialSuffix, opts, true)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create %s: %s already exists: a run may be writing it, or one that was interrupted left it (read it, then remove it): %w",
			target, target+PartialSuffix, fs.ErrExist)
	}
	return f, err
}

func newFile(target, tmp string, opts Options, stream bool) (*File, error) {
	perm := opts.Perm
	if perm == 0 {
		perm = DefaultPerm
	}
	// O_EXCL: the temporary name is ours alone, and never a link or a
	// FIFO someone put there.
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm.Perm())
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		return nil, fmt.Errorf("create %s: %w", target, unwrapPath(err))
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("create %s: %w", target, unwrapPath(err))
	}
	af := &File{f: f, target: target, tmp: tmp, opts: opts, stream: stream, info: info}
	af.write = f.Write
	return af, nil
}

// Name is the path the file is written under until Commit: the temporary
// file, or a stream's partial file.
func (f *File) Name() string { return f.tmp }

// Target is the path Commit puts the file at.
func (f *File) Target() string { return f.target }

// Write writes p. A file from Create remembers the first failure: later
// writes return it, and Commit refuses. A stream's failure is only
// returned.
func (f *File) Write(p []byte) (int, error) {
	if f.state != open {
		return 0, f.closedError("write")
	}
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.write(p)
	if err != nil {
		err = f.pathError("write", err)
		if !f.stream {
			f.err = err
		}
	}
	return n, err
}

// Sync makes what was written durable.
func (f *File) Sync() error {
	if f.state != open {
		return f.closedError("sync")
	}
	return f.pathError("sync", f.f.Sync())
}

// Truncate changes the file's size: a stream cuts off the part of a write
// that failed half way.
func (f *File) Truncate(size int64) error {
	if f.state != open {
		return f.closedError("truncate")
	}
	return f.pathError("truncate", f.f.Truncate(size))
}

// Seek sets where the next write goes, as os.File.Seek.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	if f.state != open {
		return 0, f.closedError("seek")
	}
	n, err := f.f.Seek(offset, whence)
	return n, f.pathError("seek", err)
}

// Stat describes the file being written.
func (f *File) Stat() (fs.FileInfo, error) {
	if f.state != open {
		return nil, f.closedError("stat")
	}
	info, err := f.f.Stat()
	return info, f.pathError("stat", err)
}

// Abort closes the file and removes it. After Commit it does nothing, so
// it suits a defer; aborting twice is harmless.
func (f *File) Abort() error {
	if f.state != open {
		return nil
	}
	f.state = aborted
	closeErr := f.f.Close()
	if err := os.Remove(f.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", f.tmp, unwrapPath(err))
	}
	if closeErr != nil && !errors.Is(closeErr, fs.ErrClosed) {
		return f.pathError("close", closeErr)
	}
	return nil
}

func (f *File) closedError(op string) error {
	what := "committed"
	if f.state == aborted {
		what = "aborted"
	}
	return fmt.Errorf("%s %s: the file was already %s", op, f.target, what)
}

// pathError names the target, not the temporary file, in err, and keeps
// the *fs.PathError so a caller can still take the system's reason ("no
// space left on device") out of it.
func (f *File) pathError(op string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: f.target, Err: unwrapPath(err)}
}

// WriteFile writes data to target whole or not at all.
func WriteFile(target string, data []byte, opts Options) error {
	return WriteFunc(target, opts, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc writes what write writes to target whole or not at all: if
// write or anything after it fails, the target is left as it was.
func WriteFunc(target string, opts Options, write func(io.Writer) error) error {
	f, err := Create(target, opts)
	if err != nil {
		return err
	}
	defer f.Abort() // a panic in write leaves nothing either; after Commit it does nothing
	if err := write(f); err != nil {
		f.Abort()
		if f.err != nil {
			return fmt.Errorf("nothing written to %s: %w", target, f.err)
		}
		return err
	}
	return f.Commit()
}

// unwrapPath returns the system's reason inside a *fs.PathError or
// *os.LinkError, else err.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
