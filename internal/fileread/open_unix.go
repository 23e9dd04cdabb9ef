//go:build unix

package fileread

import "syscall"

// openFlags keeps open from blocking on a FIFO swapped in after the check.
const openFlags = syscall.O_NONBLOCK
