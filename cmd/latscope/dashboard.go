package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/tui"
)

// useDashboard reports whether the live dashboard opens: unless --no-tui,
// whenever stdout is a terminal (a pipe or a file gets the headless output).
func useDashboard(stdout io.Writer, noTUI bool) bool {
	if noTUI {
		return false
	}
	f, ok := stdout.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// runWithDashboard runs m while the dashboard shows it, until the user quits
// (q, Ctrl-C) or ctx ends; quitting stops measuring, and every request in
// flight still ends in exactly one outcome. It returns the run's summary,
// for the caller to print once the terminal is restored, and whether ctx
// (a signal) interrupted it.
func runWithDashboard(ctx context.Context, m measurement, notices *noticeBoard, opts tui.Options) (aggregate.Summary, bool, error) {
	snaps := pipeline.NewLatest[aggregate.Snapshot]()
	m.observers = append(m.observers, snaps.Put)
	feeds := make(chan *tui.LiveFeed, 1)
	m.consumers = append(m.consumers, dashboardFeed{snaps: snaps, feeds: feeds})

	measureCtx, stopMeasuring := context.WithCancelCause(ctx)
	defer stopMeasuring(nil)
	type result struct {
		summary     aggregate.Summary
		interrupted bool
		err         error
	}
	done := make(chan result, 1)
	go func() {
		s, interrupted, err := m.run(measureCtx)
		done <- result{s, interrupted, err}
	}()
	feed := <-feeds // the consumers start before the pipeline does
	uiErr := showDashboard(ctx, noticeFeed{Feed: feed, notices: notices}, opts)
	notices.detach() // what the end waits for is said on the restored terminal
	// Quitting is the run's own end: the requests in flight are cancelled
	// at the end of the run, not errors (unless ctx, a signal, ended first).
	stopMeasuring(probe.ErrRunEnded)
	res := <-done
	if ctx.Err() == nil {
		res.interrupted = false // quitting the dashboard is how a run ends
	}
	if uiErr != nil && res.err == nil {
		res.err = uiErr
	}
	return res.summary, res.interrupted, res.err
}

// dashboardFeed is the dashboard's lossy subscription: the requests view's
// sample. The screen never holds up measuring.
type dashboardFeed struct {
	snaps *pipeline.Latest[aggregate.Snapshot]
	feeds chan<- *tui.LiveFeed
}

func (d dashboardFeed) start(ctx context.Context, fan *pipeline.Fanout) func() error {
	feed := tui.NewLiveFeed(d.snaps, fan.Subscribe("dashboard", 1024, pipeline.Lossy), 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		feed.Run(ctx)
	}()
	d.feeds <- feed
	return func() error { <-done; return nil }
}

// noticeFeed adds recent notices to a feed's frame: nothing may print on
// stderr while the dashboard runs. Trouble (the recorder falling behind, a
// failed write) goes with the warnings; news ("recording to run.lsr") is a
// notice, shown only while nothing is wrong.
type noticeFeed struct {
	tui.Feed
	notices *noticeBoard
}

func (n noticeFeed) Frame() (tui.Frame, uint64) {
	f, v := n.Feed.Frame()
	if lines := n.notices.recent(time.Now()); len(lines) > 0 {
		f.Status = append([]string(nil), f.Status...)
		f.Notices = append([]string(nil), f.Notices...)
		for _, l := range lines {
			if isTrouble(l) {
				f.Status = append(f.Status, l)
			} else {
				f.Notices = append(f.Notices, l)
			}
		}
	}
	// A new notice is a new frame even when the run has ended and the
	// feed's own version no longer moves (an export's closing count).
	return f, v + n.notices.written()<<48
}

// troubleWords mark a notice that reports something wrong.
var troubleWords = []string{"warning", "fail", "error", "behind", "not recorded", "lost", "refused", "dropped", "cannot", "could not"}

// isTrouble reports whether a notice says something went wrong.
func isTrouble(line string) bool {
	l := strings.ToLower(line)
	for _, w := range troubleWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// noticeBoard is an io.Writer that keeps the last lines written for a while,
// for the dashboard's header, where headless runs print them on stderr.
// Once detached (the dashboard has closed) it writes to after instead.
type noticeBoard struct {
	after io.Writer

	mu       sync.Mutex
	lines    []notice
	seq      uint64 // lines written
	detached bool
}

// written counts the lines written so far.
func (b *noticeBoard) written() uint64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// detach sends later lines to b.after: the dashboard is gone. The notices
// it showed last (an export's closing count, say) are written there first,
// so they outlive the alternate screen.
func (b *noticeBoard) detach() {
	if b == nil || b.after == nil {
		return
	}
	shown := b.recent(time.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, line := range shown {
		fmt.Fprintf(b.after, "latscope: %s\n", line)
	}
	b.detached = true
}

type notice struct {
	text string
	at   time.Time
}

// noticeTTL is how long a notice stays on the screen.
const noticeTTL = 30 * time.Second

func (b *noticeBoard) Write(p []byte) (int, error) {
	text := strings.TrimSpace(strings.TrimPrefix(string(p), "latscope: "))
	if text == "" {
		return len(p), nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.detached {
		return b.after.Write(p)
	}
	// A notice that repeats the latest one's subject up to its ';' is an
	// update of it (a failing recording's growing count): it replaces it
	// rather than push the other notices off the screen.
	if n := len(b.lines); n > 0 && sameSubject(b.lines[n-1].text, text) {
		b.lines = b.lines[:n-1]
	}
	b.lines = append(b.lines, notice{text: text, at: time.Now()})
	b.seq++
	if len(b.lines) > 4 {
		b.lines = b.lines[len(b.lines)-4:]
	}
	return len(p), nil
}

// sameSubject reports whether a and b agree up to a ';' that both have.
func sameSubject(a, b string) bool {
	i := strings.IndexByte(a, ';')
	return i > 0 && len(b) > i && b[:i+1] == a[:i+1]
}

func (b *noticeBoard) recent(now time.Time) []string {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, n := range b.lines {
		if now.Sub(n.at) < noticeTTL {
			out = append(out, n.text)
		}
	}
	return out
}

// showDashboard runs the dashboard until the user quits or ctx ends. The
// terminal's state is saved first, so that a second signal, which exits
// without waiting for Bubble Tea, still leaves it usable.
func showDashboard(ctx context.Context, feed tui.Feed, opts tui.Options) error {
	if opts.Input == nil && opts.Output == nil { // the terminal's, not a test's
		defer shutdownFrom(ctx).onForce(saveTerminal(os.Stdin, os.Stdout))()
	}
	return tui.Run(ctx, feed, opts)
}

// Escape sequences that undo the dashboard's: leave the alternate screen,
// show the cursor, stop mouse and bracketed-paste reports.
const terminalReset = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l"

// saveTerminal saves in's terminal mode and returns what puts the terminal
// back as it was: the mode restored, the screen and cursor reset on out.
func saveTerminal(in, out *os.File) (restore func()) {
	var state *term.State
	if term.IsTerminal(in.Fd()) {
		state, _ = term.GetState(in.Fd())
	}
	return func() {
		_, _ = io.WriteString(out, terminalReset)
		if state != nil {
			_ = term.Restore(in.Fd(), state)
		}
	}
}
