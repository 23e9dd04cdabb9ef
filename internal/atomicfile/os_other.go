//go:build !unix

package atomicfile

import "io/fs"

// noFollow is 0 where open has no such flag; the Lstat before the open
// still refuses a link.
const noFollow = 0

// keepOwner does nothing where files have no Unix owner.
func keepOwner(string, fs.FileInfo) {}
