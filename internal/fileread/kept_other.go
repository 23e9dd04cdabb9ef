//go:build !unix

package fileread

import (
	"errors"
	"io"
	"os"
)

// readFromStart reads f from offset 0 into buf.
func readFromStart(f *os.File, buf []byte) (int, error) {
	n, err := f.ReadAt(buf, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}
