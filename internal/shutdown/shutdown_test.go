package shutdown

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latscope/latscope/internal/testutil"
)

// TestShutdownFirstSignalCancelsSecondExits: the first signal cancels the
// context with its name as the cause; the second runs the restore hooks,
// then exits 130.
func TestShutdownFirstSignalCancelsSecondExits(t *testing.T) {
	var stderr testutil.SyncBuffer
	exited := make(chan int, 1)
	sh, ctx := New(context.Background(), &stderr, func(code int) { exited <- code })
	defer sh.Stop()
	if From(ctx) != sh {
		t.Fatal("the context does not carry its shutdown")
	}
	restored := make(chan struct{}, 2)
	defer sh.OnForce(func() { restored <- struct{}{} })()
	sh.OnForce(func() { t.Error("a removed hook ran") })()

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGHUP did not cancel the context")
	}
	if got := context.Cause(ctx); got == nil || got.Error() != "interrupted by SIGHUP" || sh.Signal() != syscall.SIGHUP {
		t.Errorf("cause %v, signal %v: want SIGHUP", got, sh.Signal())
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
		if code != ExitCode {
			t.Errorf("second signal: exit %d, want %d", code, ExitCode)
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
			var stderr testutil.SyncBuffer
			exited := make(chan int, 1)
			sh, ctx := New(context.Background(), &stderr, func(code int) { exited <- code })
			sh.handle(sig, t0)
			if ctx.Err() == nil || sh.Signal() != sig {
				t.Fatalf("%s: the first signal did not cancel the context", SignalName(sig))
			}
			sh.handle(tc.second, t0.Add(tc.after))
			select {
			case code := <-exited:
				if !tc.exits || code != ExitCode {
					t.Errorf("%s, %s: exit %d, want no exit", SignalName(sig), tc.name, code)
				}
			default:
				if tc.exits {
					t.Errorf("%s, %s: no exit, want 130 at once", SignalName(sig), tc.name)
				}
			}
			sh.Stop()
		}
	}
}

func otherSignal(sig os.Signal) os.Signal {
	if sig == syscall.SIGTERM {
		return os.Interrupt
	}
	return syscall.SIGTERM
}
