package probe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/latscope/latscope/event"
)

// LoadStep is one step of a stepped closed loop: Concurrency streams for
// Duration.
type LoadStep struct {
	Concurrency int
	Duration    time.Duration
}

// level is the stepped closed loop's current concurrency: worker w sends
// only while w < the level, and waits otherwise, so the number of streams
// follows the steps without starting or stopping goroutines.
type level struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed and replaced at every change
}

func newLevel(n int) *level { return &level{n: n, changed: make(chan struct{})} }

func (l *level) set(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n == l.n {
		return
	}
	l.n = n
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *level) get() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// admit waits until worker w may send, and reports false when ctx ends first.
func (l *level) admit(ctx context.Context, w int) bool {
	for {
		l.mu.Lock()
		n, changed := l.n, l.changed
		l.mu.Unlock()
		if w < n {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// stepLoad walks the steps after the first (again and again when repeat is
// set) until ctx ends. The first step has begun already: closedLoop begins
// it before any worker starts, so no worker sends above its level.
func (r *Runner) stepLoad(ctx context.Context, out chan<- emitItem) {
	steps := r.cfg.Steps
	timer := time.NewTimer(steps[0].Duration)
	defer timer.Stop()
	for i := 0; ; {
		select {
		case <-timer.C:
		case <-ctx.Done():
			return
		}
		i++
		if i == len(steps) {
			if !r.cfg.RepeatSteps {
				return
			}
			i = 0
		}
		if !r.beginStep(ctx, steps[i], out) {
			return
		}
		timer.Reset(steps[i].Duration)
	}
}

// beginStep sets the level to st's streams and queues a marker saying so;
// false when ctx ended first.
func (r *Runner) beginStep(ctx context.Context, st LoadStep, out chan<- emitItem) bool {
	r.level.set(st.Concurrency)
	m := event.Marker{Time: time.Now(), Kind: event.MarkerNote, Source: "probe",
		Message:  fmt.Sprintf("load step: %d concurrent streams for %s", st.Concurrency, st.Duration),
		Duration: st.Duration, Values: map[string]float64{"concurrency": float64(st.Concurrency)}}
	select {
	case out <- emitItem{marker: &m}:
		return true
	case <-ctx.Done():
		return false
	}
}

// maxSteps is the highest concurrency of steps.
func maxSteps(steps []LoadStep) int {
	n := 0
	for _, s := range steps {
		n = max(n, s.Concurrency)
	}
	return n
}
