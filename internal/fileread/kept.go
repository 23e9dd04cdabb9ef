package fileread

import (
	"fmt"
	"os"
)

// Kept is a file kept open and read whole, from its start, at every Read:
// for the /proc files a sampler reads every second, whose contents the
// kernel makes anew at each read from offset 0. Reading one through
// ReadFile costs a stat, an open (which Go follows with an epoll
// registration), an fstat, two or more reads and a close; a kept file
// costs one pread. On a virtual machine each system call wakes the
// hypervisor, and on a quiet canary those calls were most of the sampler's
// CPU. A Kept is used by one goroutine at a time.
type Kept struct {
	path string
	l    Limit
	f    *os.File
	buf  []byte
}

// keptFirstBuf is a kept file's first buffer: /proc/stat on a small
// machine, and every other file the host sampler reads, fit in it.
const keptFirstBuf = 4 * KiB

// Keep returns a kept file for path, which is opened at the first Read; l
// bounds what one Read may hold (l.Max must be set).
func Keep(path string, l Limit) *Kept { return &Kept{path: path, l: l} }

// Read returns the file's whole current contents, valid until the next
// Read. A file that is missing or unreadable is tried again, opened anew,
// at the next Read.
func (k *Kept) Read() ([]byte, error) {
	if k.f == nil {
		if err := k.open(); err != nil {
			return nil, err
		}
	}
	if k.buf == nil {
		k.buf = make([]byte, min(keptFirstBuf, k.l.Max+1))
	}
	for {
		n, err := readFromStart(k.f, k.buf)
		if err != nil {
			k.Close()
			return nil, fmt.Errorf("%s: %w", k.l.name(k.path), err)
		}
		if n < len(k.buf) {
			return k.buf[:n], nil
		}
		if int64(len(k.buf)) > k.l.Max {
			return nil, tooLarge(k.path, -1, k.l)
		}
		// Filled the buffer: it may go on. Read it again into a larger one.
		k.buf = make([]byte, min(2*int64(len(k.buf)), k.l.Max+1))
	}
}

// open opens the file if it is a regular one (a /proc file is, of size 0).
func (k *Kept) open() error {
	f, err := openRegular(k.path, Limit{Flag: k.l.Flag, What: k.l.What}) // size 0 on /proc: l.Max is checked at each read
	if err != nil {
		return err
	}
	k.f = f
	return nil
}

// Close closes the file; a later Read opens it again.
func (k *Kept) Close() {
	if k.f != nil {
		_ = k.f.Close()
		k.f = nil
	}
}
