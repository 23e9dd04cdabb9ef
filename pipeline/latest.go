package pipeline

import "sync"

// Latest holds the newest value of something published faster than a reader
// may want it (the aggregator's snapshots, for a screen): Put never waits,
// and a reader that falls behind simply skips to the newest value.
type Latest[T any] struct {
	mu      sync.Mutex
	v       T
	version uint64
	changed chan struct{}
}

// NewLatest returns an empty Latest.
func NewLatest[T any]() *Latest[T] { return &Latest[T]{changed: make(chan struct{}, 1)} }

// Put replaces the value.
func (l *Latest[T]) Put(v T) {
	l.mu.Lock()
	l.v = v
	l.version++
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Get returns the newest value and its version (0 before the first Put).
func (l *Latest[T]) Get() (T, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v, l.version
}

// Changed receives after a Put the reader has not yet been woken for; it
// suits a single reader.
func (l *Latest[T]) Changed() <-chan struct{} { return l.changed }
