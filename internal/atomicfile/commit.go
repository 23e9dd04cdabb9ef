package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/latscope/latscope/internal/fileread"
)

// Commit makes the file durable (fsync), closes it and puts it at the
// target in one rename, then syncs the directory so the rename survives a
// power cut too. The target is checked again first: without
// Options.Overwrite a file that appeared there since Create is not
// replaced (the new file is linked in place, which fails if the name is
// taken), and a symbolic link or anything but a regular file is never
// replaced.
//
// If Commit fails, a file from Create is removed and the target is as it
// was. A stream's partial file is kept, and the error names it: it holds
// the run. An error syncing the directory comes after the file is in
// place: only whether the rename would survive a power cut is unknown.
// Committing twice is harmless.
func (f *File) Commit() error {
	switch f.state {
	case committed:
		return nil
	case aborted, kept:
		return f.closedError("commit")
	}
	if f.err != nil {
		f.Abort()
		return fmt.Errorf("nothing written to %s: %w", f.target, f.err)
	}
	if err := f.finish(); err != nil {
		return f.fail(err)
	}
	if err := f.place(); err != nil {
		return f.fail(err)
	}
	f.state = committed
	return syncDir(f.target)
}

// finish syncs and closes the file.
func (f *File) finish() error {
	syncErr := f.f.Sync()
	closeErr := f.f.Close()
	if syncErr != nil {
		return f.pathError("sync", syncErr)
	}
	return f.pathError("close", closeErr)
}

// fail ends a Commit that failed: a stream keeps its partial file, any
// other file is removed, and a name someone else took over is left alone.
func (f *File) fail(err error) error {
	if errors.Is(err, ErrReplaced) {
		// The name is someone else's file now: leave it alone.
		f.f.Close()
		f.state = kept
		return err
	}
	if f.stream {
		f.f.Close()
		f.state = kept
		return fmt.Errorf("%w; the data is kept at %s", err, f.tmp)
	}
	if aerr := f.Abort(); aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

// place puts the closed temporary file at the target.
func (f *File) place() error {
	// The temporary file must still be the one written: a stream's partial
	// name is visible, and someone may have moved another file there.
	if info, err := os.Lstat(f.tmp); err != nil || !os.SameFile(info, f.info) {
		return fmt.Errorf("put %s in place: %s: %w", f.target, f.tmp, ErrReplaced)
	}
	info, err := os.Lstat(f.target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if f.opts.Overwrite {
			return f.rename()
		}
		return f.link()
	case err != nil:
		return fmt.Errorf("put %s in place: %w", f.target, unwrapPath(err))
	}
	if err := replaceable(f.target, info, f.opts); err != nil {
		return err
	}
	if err := os.Chmod(f.tmp, info.Mode().Perm()); err != nil {
		return fmt.Errorf("put %s in place: keep its permissions: %w", f.target, unwrapPath(err))
	}
	keepOwner(f.tmp, info)
	return f.rename()
}

func (f *File) rename() error {
	if err := os.Rename(f.tmp, f.target); err != nil {
		return fmt.Errorf("put %s in place: %w", f.target, unwrapPath(err))
	}
	return nil
}

// link puts the file at the target only if the target does not exist: a
// hard link fails if the name is taken, where a rename would replace it.
// A file system without hard links gets the rename, after the look place
// took.
func (f *File) link() error {
	err := os.Link(f.tmp, f.target)
	switch {
	case err == nil:
		// Both names are the file now; a failure to drop the temporary
		// one leaves a second name, not a second copy.
		_ = os.Remove(f.tmp)
		return nil
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("put %s in place: it was created while this was written (choose another name, or allow overwriting): %w", f.target, fs.ErrExist)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EMLINK):
		return f.rename()
	}
	return fmt.Errorf("put %s in place: %w", f.target, unwrapPath(err))
}

// checkTarget says whether target may be written: it is absent, or a
// regular file and opts allow replacing it and the process may write it
// (as writing it in place would need).
func checkTarget(target string, opts Options) error {
	info, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", target, unwrapPath(err))
	}
	if err := replaceable(target, info, opts); err != nil {
		return err
	}
	// O_NOFOLLOW and O_NONBLOCK: a link or a FIFO swapped in since the
	// look is neither followed nor waited on.
	g, err := os.OpenFile(target, os.O_WRONLY|noFollow|fileread.NonBlock, 0)
	if err != nil {
		return fmt.Errorf("create %s: %w", target, unwrapPath(err))
	}
	return g.Close()
}

// replaceable says whether the existing file described by info may be
// replaced.
func replaceable(target string, info fs.FileInfo, opts Options) error {
	m := info.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		return fmt.Errorf("create %s: %w: it is never replaced, nor written through", target, ErrSymlink)
	case !m.IsRegular():
		return fmt.Errorf("create %s: %w (%s)", target, ErrNotRegular, fileread.Kind(m))
	case !opts.Overwrite:
		return fmt.Errorf("create %s: it already exists (choose another name, or allow overwriting): %w", target, fs.ErrExist)
	}
	return nil
}

// syncDir makes a rename in target's directory durable. A file system
// that cannot sync a directory is not an error.
func syncDir(target string) error {
	d, err := os.Open(filepath.Dir(target))
	if err != nil {
		return fmt.Errorf("sync the directory of %s: %w", target, unwrapPath(err))
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync the directory of %s: %w", target, unwrapPath(err))
	}
	return nil
}
