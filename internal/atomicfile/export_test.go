package atomicfile

import "io/fs"

// FailWrites makes f's writes fail as a disk that fills after limit bytes
// does: a write that crosses the limit writes up to it and then fails with
// err, as os.File's write does, naming the temporary file. For tests that
// cannot fill a real disk. The bytes before the limit reach the real file.
func FailWrites(f *File, limit int, err error) {
	real, written := f.f.Write, 0
	f.write = func(p []byte) (int, error) {
		if written+len(p) <= limit {
			n, werr := real(p)
			written += n
			return n, werr
		}
		n, werr := real(p[:limit-written])
		written += n
		if werr != nil {
			return n, werr
		}
		return n, &fs.PathError{Op: "write", Path: f.tmp, Err: err}
	}
}

// HealWrites lets f's writes through again: the disk got room.
func HealWrites(f *File) { f.write = f.f.Write }
