//go:build unix

package fileread

import "syscall"

// NonBlock, added to open's flags, keeps open from blocking on a FIFO
// swapped in after a check; it changes nothing for a regular file.
const NonBlock = syscall.O_NONBLOCK
