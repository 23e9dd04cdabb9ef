package pipeline

import "sync"

// byteGate bounds the bytes of events between a sender and the goroutine
// that takes them, beside the channel's bound on their number: a channel
// of 4,096 request records of 8,192 tokens holds 0.5 GB. take waits while
// the bytes in flight would pass the limit, except for the only event in
// flight, however large, so one huge event still passes.
type byteGate struct {
	mu       sync.Mutex
	room     sync.Cond
	limit    int64
	inFlight int64
}

func newByteGate(limit int64) *byteGate {
	g := &byteGate{limit: limit}
	g.room.L = &g.mu
	return g
}

// take waits until n more bytes fit, then counts them in.
func (g *byteGate) take(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.inFlight > 0 && g.inFlight+n > g.limit {
		g.room.Wait()
	}
	g.inFlight += n
}

// give counts n bytes out, once their event has been taken off the channel.
func (g *byteGate) give(n int64) {
	g.mu.Lock()
	g.inFlight -= n
	g.mu.Unlock()
	g.room.Broadcast()
}
