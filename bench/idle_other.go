//go:build !linux

package bench

import (
	"errors"
	"io"
	"os/exec"
	"time"
)

type procUsage struct {
	cpu           time.Duration
	rssMB, peakMB float64
}

var errNoProc = errors.New("bench idle reads CPU and memory from /proc: Linux only")

func readProcUsage(int) (procUsage, error) { return procUsage{}, errNoProc }

func attachTerminal(*exec.Cmd, io.Writer) (io.Closer, error) { return nil, errNoProc }
