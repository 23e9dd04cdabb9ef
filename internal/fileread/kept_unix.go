//go:build unix

package fileread

import (
	"os"
	"syscall"
)

// readFromStart reads f from offset 0 into buf with one pread: os.File's
// ReadAt would call again to see the end of the file.
func readFromStart(f *os.File, buf []byte) (int, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var readErr error
	if err := raw.Read(func(fd uintptr) bool {
		for {
			n, readErr = syscall.Pread(int(fd), buf, 0)
			if readErr != syscall.EINTR {
				return true
			}
		}
	}); err != nil {
		return 0, err
	}
	return max(n, 0), readErr
}
