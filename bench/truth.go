package bench

import (
	"sync"
	"time"
)

// GroundTruth collects the server's flush time of every content frame, by
// request id and frame index. The simulator calls Record from its handler
// goroutines, so it is safe for concurrent use.
type GroundTruth struct {
	mu     sync.Mutex
	frames map[string][]time.Time
}

// NewGroundTruth returns an empty GroundTruth.
func NewGroundTruth() *GroundTruth {
	return &GroundTruth{frames: make(map[string][]time.Time)}
}

// Record notes that frame index of request id was flushed at t. Frames may be
// recorded in any order; a negative index is ignored.
func (g *GroundTruth) Record(id string, index int, t time.Time) {
	if index < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	fs := g.frames[id]
	if index >= len(fs) {
		fs = append(fs, make([]time.Time, index+1-len(fs))...)
	}
	fs[index] = t
	g.frames[id] = fs
}

// Frames returns the flush times recorded for id, or nil. A frame that was
// never recorded (a gap) has the zero time.
func (g *GroundTruth) Frames(id string) []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.frames[id]
}
