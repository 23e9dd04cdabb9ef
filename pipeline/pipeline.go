// Package pipeline moves latscope's events one way:
//
//	sources ──► stage (the attributor) ──► fan-out ──► consumers
//	(probe, collectors,                     each with its own bounded buffer:
//	 a recording, an agent)                 aggregator, recorder, dashboard, agent
//
// A Source only emits. The Stage joins what belongs together (server spans
// onto request records). The Fanout gives every consumer its own buffer: a
// lossless consumer (the aggregator, the recorder) gets every event, and
// when it falls behind the fan-out waits for it and counts the time waited;
// a lossy consumer (a screen, a remote viewer) loses events instead, and is
// told how many with a Loss event. Measuring never waits on a lossy consumer.
package pipeline

import (
	"context"
	"errors"
	"sync"

	"github.com/latscope/latscope/event"
)

// Source produces events until it is done or ctx ends. The probe, the
// collectors, a recording and a remote agent are sources. emit may be called
// from several goroutines; it blocks while the pipeline is full and must not
// be called after Run returns.
type Source interface {
	Run(ctx context.Context, emit func(event.Event)) error
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(ctx context.Context, emit func(event.Event)) error

// Run calls f.
func (f SourceFunc) Run(ctx context.Context, emit func(event.Event)) error { return f(ctx, emit) }

// Stage transforms the stream between the sources and the fan-out. It reads
// in until it is closed, writes to out, and closes out when it is done.
type Stage interface {
	Run(ctx context.Context, in <-chan event.Event, out chan<- event.Event)
}

// Settler is a Stage that may still be waiting for events from the other
// sources after the primary ones end (the attributor holds finished requests
// for their late server spans). Settle returns once it waits for nothing, or
// when ctx ends.
type Settler interface {
	Settle(ctx context.Context)
}

// rawItem is what the sources' buffer carries: an event, or a barrier
// whose channel is closed once every event before it has been handed to
// the stage.
type rawItem struct {
	ev     event.Event
	handed chan struct{}
}

// handAll waits until the stage has taken every event emitted so far (raw
// is FIFO and the hand-off unbuffered), so that a Settler judges what it
// holds with all of the primaries' events in it; false when ctx ended first.
func handAll(ctx context.Context, raw chan<- rawItem) bool {
	handed := make(chan struct{})
	select {
	case raw <- rawItem{handed: handed}:
	case <-ctx.Done():
		return false
	}
	select {
	case <-handed:
		return true
	case <-ctx.Done():
		return false
	}
}

// Result is how a session ended, besides its errors.
type Result struct {
	// Interrupted: ctx ended before the primary sources had ended on their
	// own (Ctrl-C); the consumers still got every event emitted until
	// then. It is decided when the primaries return, before any consumer
	// sees the end of the stream, so a consumer's reaction to the end
	// cannot change it. An interruption is how a run may end, not a
	// failure, so it is no error.
	Interrupted bool
}

// Config is one session's wiring.
type Config struct {
	// Header, when set, is published before any other event.
	Header *event.Session
	// Primary sources decide how long the session lasts: it ends when all of
	// them have returned.
	Primary []Source
	// Aux sources (metrics scrape, GPU, span receiver) run until the
	// primaries have ended and the stage has settled.
	Aux []Source
	// Stage sits between the sources and the fan-out; nil passes events on
	// unchanged.
	Stage Stage
	// Buffer is the size of the channel the sources emit into (default 4096).
	Buffer int
}

// stagedBuffer is the channel between the stage and the fan-out.
const stagedBuffer = 64

// Run runs one session: it publishes the header, starts the sources, and
// when the primaries are done, settles the stage, stops the aux sources and
// closes the fan-out, so every consumer sees its channel close after the last
// event. Nothing emitted is lost on the way: after ctx ends (Ctrl-C) the
// stage and the fan-out still drain what the sources emitted while stopping.
// Run returns whether ctx ended the primaries (Result.Interrupted), and
// the primaries' errors and the aux sources' errors other than their
// context ending.
func Run(ctx context.Context, cfg Config, fan *Fanout) (Result, error) {
	size := cfg.Buffer
	if size <= 0 {
		size = 4096
	}
	// The sources' events wait for the stage in raw, bounded by bytes as
	// well as by count (a slow consumer makes the sources wait here).
	gate := newByteGate(DefaultBufferBytes)
	raw := make(chan rawItem, size)
	emit := func(ev event.Event) {
		gate.take(ev.Size())
		raw <- rawItem{ev: ev}
	}
	taken := make(chan event.Event)
	go func() { // owned by Run: ends when raw closes
		defer close(taken)
		for it := range raw {
			if it.handed != nil {
				close(it.handed)
				continue
			}
			gate.give(it.ev.Size())
			// Every source's text (a server's error body, a model's
			// name) is made safe to show once, here, for every consumer.
			taken <- event.Safe(it.ev)
		}
	}()
	drainCtx := context.WithoutCancel(ctx)

	if cfg.Header != nil {
		fan.Publish(event.Safe(event.NewSession(cfg.Header)))
	}

	// The stage and the fan-out drain until their input closes, not until
	// ctx ends, so a Ctrl-C still delivers the cancelled requests' records.
	out := taken
	if cfg.Stage != nil {
		// Small: what the stage lets go waits for the fan-out, whose
		// buffers are bounded by bytes.
		staged := make(chan event.Event, stagedBuffer)
		go cfg.Stage.Run(drainCtx, taken, staged)
		out = staged
	}
	published := make(chan struct{})
	go func() {
		defer close(published)
		for ev := range out {
			fan.Publish(ev)
		}
		fan.Close()
	}()

	auxCtx, stopAux := context.WithCancel(ctx)
	defer stopAux()
	var errMu sync.Mutex
	var errs []error
	record := func(err error, aux bool) {
		if err == nil || aux && errors.Is(err, context.Canceled) {
			return
		}
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	var auxWG, primaryWG sync.WaitGroup
	for _, s := range cfg.Aux {
		auxWG.Go(func() { record(s.Run(auxCtx, emit), true) })
	}
	for _, s := range cfg.Primary {
		primaryWG.Go(func() { record(s.Run(ctx, emit), false) })
	}
	primaryWG.Wait()
	res := Result{Interrupted: ctx.Err() != nil}

	if st, ok := cfg.Stage.(Settler); ok && handAll(ctx, raw) {
		st.Settle(ctx)
	}
	stopAux()
	auxWG.Wait()
	close(raw)
	<-published
	return res, errors.Join(errs...)
}
