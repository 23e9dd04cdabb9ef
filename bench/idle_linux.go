//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procUsage is a child's counters as /proc has them.
type procUsage struct {
	cpu           time.Duration // user + system, all its threads
	rssMB, peakMB float64       // VmRSS and VmHWM
}

// clockTicks is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

func readProcUsage(pid int) (procUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procUsage{}, err
	}
	// The command name, in parentheses, may hold spaces: the fields are
	// counted from after its closing one (utime and stime are 14 and 15).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procUsage{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return procUsage{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return procUsage{}, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	u := procUsage{cpu: time.Duration(ut+st) * time.Second / clockTicks}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procUsage{}, err
	}
	u.rssMB, u.peakMB = statusMB(status, "VmRSS:"), statusMB(status, "VmHWM:")
	return u, nil
}

// statusMB is the figure of a /proc status line such as "VmRSS:  1234 kB",
// in MB (10^6 bytes); 0 when the line is missing.
func statusMB(status []byte, key string) float64 {
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := bytes.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseFloat(string(f[0]), 64)
				if err == nil {
					return kb * 1024 / 1e6
				}
			}
		}
	}
	return 0
}

// attachTerminal gives cmd a new pseudo-terminal of 120×40 as its
// standard input, output and error and controlling terminal, and drains
// what it draws into screen. The returned closer closes the terminal's master side.
func attachTerminal(cmd *exec.Cmd, screen io.Writer) (io.Closer, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open a terminal: %w", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, fmt.Errorf("unlock the terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("name the terminal: %w", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("open the terminal's side: %w", err)
	}
	_ = unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	go func() { _, _ = io.Copy(answering{screen: screen, term: master}, master) }() // ends when master closes
	return closers{slave, master}, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// answering passes what a program draws to screen and answers on term the
// two questions a dashboard asks its terminal before it starts (its
// background colour, OSC 11, and the cursor's place, DSR 6), as a
// terminal would: unanswered, it waits for them. A question split over
// two reads goes unanswered; the program then waits out its own timeout.
type answering struct {
	screen io.Writer
	term   io.Writer
}

func (a answering) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("\x1b]11;?")) {
		_, _ = a.term.Write([]byte("\x1b]11;rgb:0000/0000/0000\x1b\\"))
	}
	if bytes.Contains(p, []byte("\x1b[6n")) {
		_, _ = a.term.Write([]byte("\x1b[1;1R"))
	}
	return a.screen.Write(p)
}
