package collector

// This file holds the host collector's parsers of the /proc formats it
// reads: pure functions of the text, fuzzed in host_parse_test.go.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// psiLine is the "some" line of a pressure file (/proc/pressure/cpu):
// the kernel's 10-second average of the share of time at least one task
// waited, in percent, and the total time they waited, in microseconds.
type psiLine struct {
	avg10 float64 // percent, 0..100
	total uint64  // µs
}

// errNoSomeLine: a pressure file without a well-formed "some" line.
var errNoSomeLine = errors.New(`no "some" line with avg10 and total`)

// parsePSI reads the "some" line of a pressure file:
//
//	some avg10=1.23 avg60=0.50 avg300=0.10 total=123456
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
func parsePSI(text string) (psiLine, error) {
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "some" {
			continue
		}
		var p psiLine
		var haveAvg, haveTotal bool
		for _, f := range fields[1:] {
			key, val, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			switch key {
			case "avg10":
				v, err := strconv.ParseFloat(val, 64)
				if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
					return psiLine{}, fmt.Errorf("avg10 %q: not a percentage", val)
				}
				p.avg10, haveAvg = v, true
			case "total":
				v, err := strconv.ParseUint(val, 10, 64)
				if err != nil {
					return psiLine{}, fmt.Errorf("total %q: not a count of microseconds", val)
				}
				p.total, haveTotal = v, true
			}
		}
		if !haveAvg || !haveTotal {
			return psiLine{}, errNoSomeLine
		}
		return p, nil
	}
	return psiLine{}, errNoSomeLine
}

// cpuTimes are the aggregate "cpu" line of /proc/stat, in clock ticks
// since boot: busy (user, nice, system, irq, softirq), idle (idle and
// iowait) and steal. Guest time is in user already, so it is not added.
type cpuTimes struct {
	busy, idle, steal uint64
}

// total is every tick the line counts.
func (c cpuTimes) total() uint64 { return c.busy + c.idle + c.steal }

// procStat is what the host collector takes from /proc/stat.
type procStat struct {
	cpu          cpuTimes
	cores        int // "cpuN" lines: the CPUs online
	procsRunning int // runnable tasks now; -1 when the line is missing
}

// maxProcStatCPUs bounds the cpuN lines counted, so a hostile file cannot
// state an absurd core count.
const maxProcStatCPUs = 1 << 16

// errNoCPULine: /proc/stat without its aggregate "cpu" line.
var errNoCPULine = errors.New(`no aggregate "cpu" line`)

// parseProcStat reads the aggregate cpu line, counts the cpuN lines and
// takes procs_running:
//
//	cpu  344101 74326 77749 7483892 2684 0 5961 3523 0 0
//	cpu0 169880 36772 36150 3748501 576 0 2697 1713 0 0
//	...
//	procs_running 3
func parseProcStat(text string) (procStat, error) {
	s := procStat{procsRunning: -1}
	haveCPU := false
	for line := range strings.Lines(text) {
		// The first word decides: the long intr and softirq lines are
		// skipped without being split.
		if first := firstWord(line); !strings.HasPrefix(first, "cpu") && first != "procs_running" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch name := fields[0]; {
		case name == "cpu":
			c, err := parseCPULine(fields[1:])
			if err != nil {
				return procStat{}, err
			}
			s.cpu, haveCPU = c, true
		case strings.HasPrefix(name, "cpu") && isDigits(name[3:]):
			if s.cores < maxProcStatCPUs {
				s.cores++
			}
		case name == "procs_running" && len(fields) == 2:
			n, err := strconv.Atoi(fields[1])
			if err != nil || n < 0 {
				return procStat{}, fmt.Errorf("procs_running %q: not a count", fields[1])
			}
			s.procsRunning = n
		}
	}
	if !haveCPU {
		return procStat{}, errNoCPULine
	}
	return s, nil
}

// parseCPULine reads the numbers of a cpu line: user nice system idle
// iowait irq softirq steal [guest guest_nice]. Kernels before 2.6.11 have
// no steal column; four columns are the least accepted.
func parseCPULine(cols []string) (cpuTimes, error) {
	if len(cols) < 4 {
		return cpuTimes{}, fmt.Errorf("cpu line has %d columns, want at least 4", len(cols))
	}
	var v [8]uint64
	for i := 0; i < len(cols) && i < len(v); i++ {
		n, err := strconv.ParseUint(cols[i], 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("cpu column %d %q: not a count of ticks", i+1, cols[i])
		}
		v[i] = n
	}
	// Sums saturate: a hostile file's huge counts must not wrap around.
	busy := satAdd(satAdd(satAdd(v[0], v[1]), satAdd(v[2], v[5])), v[6])
	return cpuTimes{busy: busy, idle: satAdd(v[3], v[4]), steal: v[7]}, nil
}

// satAdd adds without wrapping around.
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// firstWord is the first of line's fields, "" when it has none.
func firstWord(line string) string {
	for w := range strings.FieldsSeq(line) {
		return w
	}
	return ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parseSelfStat reads a process's CPU time, user plus system, in clock
// ticks, from its /proc/<pid>/stat line:
//
//	15011 (cat) R 15003 ... utime stime ...
//
// The command name may hold spaces and parentheses, so the fields are
// counted from the last ')'.
func parseSelfStat(text string) (uint64, error) {
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, errors.New("no ')' closing the command name")
	}
	// After the name: state(3) ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime(14) stime(15).
	const utime, stime = 14 - 3, 15 - 3
	var fields [stime + 1]string // the first ones only: the line goes on for 40 more
	n := 0
	for f := range strings.FieldsSeq(text[i+1:]) {
		fields[n] = f
		if n++; n == len(fields) {
			break
		}
	}
	if n <= stime {
		return 0, fmt.Errorf("%d fields after the command name, want at least %d", n, stime+1)
	}
	u, err := strconv.ParseUint(fields[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime %q: not a count of ticks", fields[utime])
	}
	s, err := strconv.ParseUint(fields[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime %q: not a count of ticks", fields[stime])
	}
	return satAdd(u, s), nil
}
