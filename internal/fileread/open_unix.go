//go:build unix

package fileread

import "syscall"

// NonBlock, added to open's flags, keeps open from blocking on a FIFO
// swapped in after a check; it changes nothing for a regular file.
const NonBlock = syscall.O_NONBLOCK

// NoFollow, added to open's flags, refuses a symbolic link at the path's
// last element: a link planted where a file is written.
const NoFollow = syscall.O_NOFOLLOW
