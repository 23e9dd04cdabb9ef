//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises this process's open-file limit (RLIMIT_NOFILE) to
// its hard limit, as far as the system lets it, and returns the limit now
// in force: every stream holds a socket.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur < lim.Max {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return lim.Cur, fmt.Errorf("raise the open-file limit from %d to %d: %w", lim.Cur, lim.Max, err)
		}
		lim = raised
	}
	return lim.Cur, nil
}
