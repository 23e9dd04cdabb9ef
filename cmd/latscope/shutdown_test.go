package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/session"
)

// TestShutdownFirstSignalCancelsSecondExits: the first signal cancels the
// context with its name as the cause; the second runs the restore hooks,
// then exits 130.
func TestShutdownFirstSignalCancelsSecondExits(t *testing.T) {
	var stderr syncBuffer
	exited := make(chan int, 1)
	sh, ctx := newShutdown(context.Background(), &stderr, func(code int) { exited <- code })
	defer sh.stop()
	if shutdownFrom(ctx) != sh {
		t.Fatal("the context does not carry its shutdown")
	}
	restored := make(chan struct{}, 2)
	defer sh.onForce(func() { restored <- struct{}{} })()
	sh.onForce(func() { t.Error("a removed hook ran") })()

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGHUP did not cancel the context")
	}
	if got := context.Cause(ctx); got == nil || got.Error() != "interrupted by SIGHUP" || sh.signal() != syscall.SIGHUP {
		t.Errorf("cause %v, signal %v: want SIGHUP", got, sh.signal())
	}
	select {
	case code := <-exited:
		t.Fatalf("the first signal exited (%d)", code)
	default:
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != exitInterrupted {
			t.Errorf("second signal: exit %d, want %d", code, exitInterrupted)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a second signal did not exit")
	}
	select {
	case <-restored:
	default:
		t.Error("the restore hook did not run before the exit")
	}
	if !strings.Contains(stderr.String(), "second signal (SIGTERM)") {
		t.Errorf("stderr %q: want the second signal named", stderr.String())
	}
}

// TestExitCodes: one table for every command; a signal makes the exit 130
// whatever else the command returned, and keeps real failures visible.
func TestExitCodes(t *testing.T) {
	real := errors.New("write the summary: input/output error")
	for _, tc := range []struct {
		name    string
		err     error
		sig     os.Signal
		code    int
		printed string
	}{
		{"ok", nil, nil, 0, ""},
		{"failure", errors.New("boom"), nil, exitFailure, "latscope: boom"},
		{"slo", &exitError{code: exitSLOMissed, err: errors.New("1 of 1 objectives missed")}, nil, exitSLOMissed, "objectives missed"},
		{"signal, nothing returned", nil, syscall.SIGTERM, exitInterrupted, "latscope: interrupted (SIGTERM)"},
		{"signal, context canceled", fmt.Errorf("agent x: %w", context.Canceled), syscall.SIGINT, exitInterrupted, "latscope: interrupted (SIGINT)"},
		{"signal, summary so far", &exitError{code: exitInterrupted, err: errors.New("interrupted: the summary covers the requests sent until then")}, syscall.SIGHUP, exitInterrupted, "the summary covers the requests sent until then (SIGHUP)"},
		{"signal, during set-up", fmt.Errorf("%w (while calibrating the prompts)", session.ErrSetupInterrupted), syscall.SIGTERM, exitInterrupted, "while calibrating the prompts) (SIGTERM)"},
		{"signal, and a real failure", errors.Join(context.Canceled, real), syscall.SIGHUP, exitInterrupted, "input/output error\nlatscope: interrupted (SIGHUP)"},
		{"signal wins over a missed SLO", &exitError{code: exitSLOMissed, err: errors.New("missed")}, syscall.SIGTERM, exitInterrupted, "interrupted (SIGTERM)"},
	} {
		var b strings.Builder
		if code := exitCode(&b, tc.err, tc.sig); code != tc.code || !strings.Contains(b.String(), tc.printed) {
			t.Errorf("%s: exit %d, printed %q; want %d and %q", tc.name, code, b.String(), tc.code, tc.printed)
		}
	}
}

// TestShutdownSameSignalTwiceAtOnce: timeout(1) sends its signal to the
// process and to its group, so it arrives twice at once; the second copy
// is not a second signal (which would exit before the summary). The same
// signal later, or another one at once, still is. Each signal is handled
// with the time it came, so no clock runs.
func TestShutdownSameSignalTwiceAtOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	for _, sig := range interruptSignals {
		for _, tc := range []struct {
			name   string
			second os.Signal
			after  time.Duration
			exits  bool
		}{
			{"again at once", sig, time.Millisecond, false},
			{"again later", sig, echoWindow, true},
			{"another at once", otherSignal(sig), time.Millisecond, true},
		} {
			var stderr syncBuffer
			exited := make(chan int, 1)
			sh, ctx := newShutdown(context.Background(), &stderr, func(code int) { exited <- code })
			sh.handle(sig, t0)
			if ctx.Err() == nil || sh.signal() != sig {
				t.Fatalf("%s: the first signal did not cancel the context", signalName(sig))
			}
			sh.handle(tc.second, t0.Add(tc.after))
			select {
			case code := <-exited:
				if !tc.exits || code != exitInterrupted {
					t.Errorf("%s, %s: exit %d, want no exit", signalName(sig), tc.name, code)
				}
			default:
				if tc.exits {
					t.Errorf("%s, %s: no exit, want 130 at once", signalName(sig), tc.name)
				}
			}
			sh.stop()
		}
	}
}

func otherSignal(sig os.Signal) os.Signal {
	if sig == syscall.SIGTERM {
		return os.Interrupt
	}
	return syscall.SIGTERM
}
