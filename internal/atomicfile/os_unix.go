//go:build unix

package atomicfile

import (
	"io/fs"
	"os"
	"syscall"
)

// noFollow, added to open's flags, makes open fail on a symbolic link.
const noFollow = syscall.O_NOFOLLOW

// keepOwner gives path the owner and group of the file info describes,
// where the process may (root may; others may keep only their own): the
// replaced file's owner should not change because latscope rewrote it.
// A failure leaves the writer's owner, which is what a new file has.
func keepOwner(path string, info fs.FileInfo) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid() {
		return
	}
	_ = os.Lchown(path, int(st.Uid), int(st.Gid))
}
