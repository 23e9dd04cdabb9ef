//go:build acceptance

package deploy

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers for tests that run latscope and Prometheus as processes (the
// acceptance tier; .ci/run vets it with -tags acceptance).

// buildLatscope builds the latscope command into a temporary directory,
// or takes the one $LATSCOPE_BIN names (a machine without Go).
func buildLatscope(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("LATSCOPE_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "latscope")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/latscope/latscope/cmd/latscope")
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build latscope: %v\n%s", err, out)
	}
	return bin
}

// process is a command the test started; its stderr (and stdout) lines
// are kept, and a waiter can wait for one that matches.
type process struct {
	name string
	cmd  *exec.Cmd

	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed and replaced when a line arrives
	done  chan struct{} // closed when the output ends
}

// start runs name with args until the test ends (then it is killed and
// waited for).
func start(t *testing.T, label, name string, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{name: label, cmd: exec.CommandContext(ctx, name, args...), grew: make(chan struct{}), done: make(chan struct{})}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", label, err)
	}
	exited := make(chan struct{})
	go func() { // owned by the test: ends when the process exits
		_ = p.cmd.Wait()
		w.Close()
		close(exited)
	}()
	go func() { // owned by the test: ends when the pipe closes
		defer close(p.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.grew)
			p.grew = make(chan struct{})
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		<-p.done
		if t.Failed() {
			t.Logf("%s said:\n%s", label, p.output())
		}
	})
	return p
}

// waitFor waits until a line matches re and returns its submatches.
func (p *process) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	seen := 0
	for {
		p.mu.Lock()
		lines, grew := p.lines, p.grew
		p.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if m := re.FindStringSubmatch(lines[seen]); m != nil {
				return m
			}
		}
		select {
		case <-grew:
		case <-p.done:
			p.mu.Lock()
			more := len(p.lines) > seen
			p.mu.Unlock()
			if !more {
				t.Fatalf("%s ended without saying %q:\n%s", p.name, re, p.output())
			}
		case <-deadline:
			t.Fatalf("%s did not say %q within %s:\n%s", p.name, re, within, p.output())
		}
	}
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// freeAddr is a loopback address nothing listens on now, for a process
// that cannot be told to take port 0 and say which it got.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
