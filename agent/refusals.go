package agent

import (
	"log/slog"
	"sync"
	"time"
)

// refusalLogEvery is the least time between two log lines about refused
// requests: a scanner or a misconfigured client can send thousands a
// second, and the exact count is on /metrics anyway.
const refusalLogEvery = 10 * time.Second

// refusalLog logs the first refused request, then at most one line every
// refusalLogEvery counting those refused since the last line; flush says
// what is left when the agent stops. Safe for concurrent use.
type refusalLog struct {
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	lastLine time.Time // when the latest line was logged (zero before any)
	unsaid   int64     // refused since, not yet in a line
}

func (l *refusalLog) refused(path, remote string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.lastLine.IsZero() {
		l.lastLine = now
		l.log.Info("refused a request without the right token (401); later ones are counted, one line every 10s",
			"path", path, "remote", remote)
		return
	}
	l.unsaid++
	if now.Sub(l.lastLine) >= refusalLogEvery {
		l.sayLocked(now)
	}
}

// sayLocked logs the count not yet said.
func (l *refusalLog) sayLocked(now time.Time) {
	if l.unsaid == 0 {
		return
	}
	l.log.Info("more refused requests (401)", "count", l.unsaid, "since", l.lastLine.Format(time.RFC3339))
	l.unsaid, l.lastLine = 0, now
}

// flush logs the refusals not yet said.
func (l *refusalLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sayLocked(l.now())
}
