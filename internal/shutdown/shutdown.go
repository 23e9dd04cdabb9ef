// Package shutdown owns a process's signals, in one place: SIGINT, SIGTERM
// and SIGHUP all mean "interrupted". The first cancels a context, the
// second exits at once after the restore hooks ran.
package shutdown

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Shutdown owns the process's signals, in one place: SIGINT, SIGTERM and
// SIGHUP all mean "interrupted". The first cancels the context it gives
// (its cause names the signal): the load stops, consumers drain, the
// terminal is restored and the summary so far is printed, exit 130. The
// second exits at once, still restoring the terminal through the hooks
// registered with OnForce. The first signal again within echoWindow is not
// a second one: see echoWindow.
//
// Bubble Tea's own signal handler is off (tui.Run): two handlers of one
// signal raced, and Bubble Tea's could block forever sending to an event
// loop that had already stopped.
type Shutdown struct {
	stderr io.Writer
	exit   func(code int) // os.Exit; a test's recorder
	sigs   chan os.Signal
	done   chan struct{} // closed by stop: the watcher returns
	wg     sync.WaitGroup

	cancel context.CancelCauseFunc

	mu      sync.Mutex
	first   os.Signal
	firstAt time.Time // when the first came, on the watcher's clock
	hooks   map[int]func()
	nextID  int
}

// ExitCode is what a second signal exits with, as an interrupted command
// does.
const ExitCode = 130

// interruptSignals are the signals that interrupt a command.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// echoWindow is how soon after the first signal the same one again is the
// same delivery, twice: timeout(1) and a kill of the process group send it
// to the process and to its group, microseconds apart, and taken as a
// second signal it would exit before the summary. A user who means it
// presses again later, or sends another signal.
const echoWindow = 500 * time.Millisecond

// InterruptedBy is the cause of a context the first signal cancelled.
type InterruptedBy struct{ Sig os.Signal }

func (e InterruptedBy) Error() string { return "interrupted by " + SignalName(e.Sig) }

// New starts watching the signals; ctx, derived from parent, ends
// with the first. Stop must be called when the command returns.
func New(parent context.Context, stderr io.Writer, exit func(int)) (*Shutdown, context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	s := &Shutdown{
		stderr: stderr, exit: exit,
		sigs:   make(chan os.Signal, 2),
		done:   make(chan struct{}),
		cancel: cancel,
		hooks:  map[int]func(){},
	}
	signal.Notify(s.sigs, interruptSignals...)
	s.wg.Add(1)
	go s.watch()
	return s, withShutdown(ctx, s)
}

func (s *Shutdown) watch() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case sig := <-s.sigs:
			s.handle(sig, time.Now())
		}
	}
}

// handle acts on one signal, received at `at`: the first cancels the
// context, the same one again within echoWindow does nothing, any other
// forces the exit.
func (s *Shutdown) handle(sig os.Signal, at time.Time) {
	s.mu.Lock()
	first := s.first == nil
	echo := !first && sig == s.first && at.Sub(s.firstAt) < echoWindow
	if first {
		s.first, s.firstAt = sig, at
	}
	s.mu.Unlock()
	switch {
	case first:
		s.cancel(InterruptedBy{Sig: sig})
	case echo: // the first, delivered twice
	default:
		s.force(sig)
	}
}

// force runs the hooks (restoring the terminal), newest first, and exits.
func (s *Shutdown) force(sig os.Signal) {
	s.mu.Lock()
	ids := make([]int, 0, len(s.hooks))
	for id := range s.hooks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	hooks := make([]func(), 0, len(ids))
	for _, id := range slices.Backward(ids) {
		hooks = append(hooks, s.hooks[id])
	}
	s.mu.Unlock()
	for _, h := range hooks {
		h()
	}
	fmt.Fprintf(s.stderr, "latscope: second signal (%s): exiting now, without waiting\n", SignalName(sig))
	s.exit(ExitCode)
}

// OnForce registers fn to run before a second signal exits the process;
// the returned func removes it. A nil shutdown (a command run by a test)
// keeps nothing.
func (s *Shutdown) OnForce(fn func()) (remove func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.hooks[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.hooks, id)
	}
}

// Signal returns the first signal received, or nil.
func (s *Shutdown) Signal() os.Signal {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// Stop stops watching; signals from now on have their default effect.
func (s *Shutdown) Stop() {
	signal.Stop(s.sigs)
	close(s.done)
	s.wg.Wait()
	s.cancel(nil)
}

// SignalName is sig as a person reads it (SIGINT).
func SignalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// shutdownKey holds the command's shutdown in its context: commands reach
// it through cmd.Context(), without a global.
type shutdownKey struct{}

func withShutdown(ctx context.Context, s *Shutdown) context.Context {
	return context.WithValue(ctx, shutdownKey{}, s)
}

// From returns ctx's shutdown, or nil (every method takes nil).
func From(ctx context.Context) *Shutdown {
	s, _ := ctx.Value(shutdownKey{}).(*Shutdown)
	return s
}
