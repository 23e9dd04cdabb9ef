package tui

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// WithNotices adds b's recent notices to f's frames: nothing may print on
// stderr while the dashboard runs. Trouble (the recorder falling behind, a
// failed write) goes with the warnings; news ("recording to run.lsr") is a
// notice, shown only while nothing is wrong. A nil b adds nothing.
func WithNotices(f Feed, b *NoticeBoard) Feed { return noticeFeed{Feed: f, notices: b} }

type noticeFeed struct {
	Feed
	notices *NoticeBoard
}

// Changed passes on the feed's change channel; a new notice alone shows
// at the screen's next look (within waitLongest).
func (n noticeFeed) Changed() <-chan struct{} { return changesOf(n.Feed) }

func (n noticeFeed) Frame() (Frame, uint64) {
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

// NoticeBoard is an io.Writer that keeps the last lines written for a
// while, for the dashboard's header, where headless runs print them on
// stderr. Once detached (the dashboard has closed) it writes to After
// instead.
type NoticeBoard struct {
	After io.Writer

	mu       sync.Mutex
	lines    []notice
	seq      uint64 // lines written
	detached bool
}

// written counts the lines written so far.
func (b *NoticeBoard) written() uint64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Detach sends later lines to b.After: the dashboard is gone. The notices
// it showed last (an export's closing count, say) are written there first,
// so they outlive the alternate screen.
func (b *NoticeBoard) Detach() {
	if b == nil || b.After == nil {
		return
	}
	shown := b.recent(time.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, line := range shown {
		fmt.Fprintf(b.After, "latscope: %s\n", line)
	}
	b.detached = true
}

type notice struct {
	text string
	at   time.Time
}

// noticeTTL is how long a notice stays on the screen.
const noticeTTL = 30 * time.Second

func (b *NoticeBoard) Write(p []byte) (int, error) {
	text := strings.TrimSpace(strings.TrimPrefix(string(p), "latscope: "))
	if text == "" {
		return len(p), nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.detached {
		return b.After.Write(p)
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

func (b *NoticeBoard) recent(now time.Time) []string {
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
