package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// MaxSpeed replays without waiting between events.
const MaxSpeed = math.MaxFloat64

// ReplayOptions configure a Replay. The zero value replays in real time from
// the start.
type ReplayOptions struct {
	// Speed is how many seconds of the recording play per second: 1 (the
	// default when zero), 10, or MaxSpeed.
	Speed float64
	// From skips ahead: the events before this time are emitted at once,
	// without pacing, then pacing starts at From. To seek, start a fresh
	// aggregation fed by a fresh Replay with From set to the target.
	From time.Time
	// Paused starts the replay paused, once it reaches From.
	Paused bool
	// Clock paces the replay; nil means the system clock.
	Clock Clock
	// Name is what errors call the file; empty means its path. A recording
	// read from standard input is replayed from a copy, named "-" here.
	Name string
}

// Replay is a pipeline.Source that emits a recording's events, the session
// header first (so a pipeline replaying one needs no Config.Header), paced
// by their own timestamps.
//
// Events are not in time order in a file (a request is stamped with its
// start but recorded when it ends), so each is emitted at its "emit time":
// the latest event time seen so far, which never goes backwards. Consumers
// aggregate on the events' own times (event.Event.Time), as they do live.
type Replay struct {
	path       string
	name       string // for errors
	from       time.Time
	pacer      *pacer
	mu         sync.Mutex
	played     time.Time // the emit time of the latest event emitted
	duplicates int64     // request events not emitted: the recording held them twice
}

var _ pipeline.Source = (*Replay)(nil)

// NewReplay returns a Replay of the recording at path; the file is opened by
// Run.
func NewReplay(path string, opts ReplayOptions) *Replay {
	speed := opts.Speed
	if speed <= 0 {
		speed = 1
	}
	name := opts.Name
	if name == "" {
		name = path
	}
	return &Replay{
		path:  path,
		name:  name,
		from:  opts.From,
		pacer: &pacer{clock: clockOrSystem(opts.Clock), speed: speed, paused: opts.Paused, changed: make(chan struct{})},
	}
}

// Run emits the recording's events until the end of the file or ctx ends.
// It returns nil at a clean end, and a *TornTailError (a warning: every
// complete frame was emitted) when the file ends inside a frame. A Replay
// runs once; Duplicates is its count once it has returned.
func (r *Replay) Run(ctx context.Context, emit func(event.Event)) error {
	rd, err := Open(r.path)
	if err != nil {
		return fmt.Errorf("replay %s: %w", r.name, err)
	}
	defer rd.Close()
	defer func() { r.setDuplicates(rd.Duplicates()) }()
	var at, first time.Time // the emit time, and the first event's
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("replay %s: %w", r.name, err)
		}
		at = later(at, ev.Time())
		if first.IsZero() {
			first = at
		}
		if err := r.pace(ctx, at, first); err != nil {
			return err
		}
		emit(ev)
		r.pacer.emitted(at)
		r.setPlayed(at)
	}
}

// pace waits until the event with emit time at is due. Before From nothing
// waits; pacing starts at From (or the first event), so the first event
// after a seek comes as long after it as it did after From.
func (r *Replay) pace(ctx context.Context, at, first time.Time) error {
	if at.Before(r.from) {
		return ctx.Err()
	}
	r.pacer.start(later(first, r.from))
	return r.pacer.wait(ctx, at)
}

// Pause stops (true) or resumes (false) the replay; safe from any goroutine.
func (r *Replay) Pause(paused bool) { r.pacer.pause(paused) }

// SetSpeed changes the speed (see ReplayOptions.Speed); safe from any
// goroutine.
func (r *Replay) SetSpeed(speed float64) {
	if speed > 0 {
		r.pacer.setSpeed(speed)
	}
}

// Position returns the emit time of the latest event emitted (zero before
// the first): where a seek of "ten seconds back" counts from.
func (r *Replay) Position() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.played
}

// Duplicates counts the request events the replay did not emit because the
// recording held them twice (see Reader): each request is emitted once.
func (r *Replay) Duplicates() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.duplicates
}

func (r *Replay) setPlayed(t time.Time) {
	r.mu.Lock()
	r.played = t
	r.mu.Unlock()
}

func (r *Replay) setDuplicates(n int64) {
	r.mu.Lock()
	r.duplicates = n
	r.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pacer maps recording time to clock time. The playhead is at pos at clock
// time wall and moves at speed while not paused; Pause and SetSpeed move pos
// and wall to "now", so a change never makes the playhead jump.
type pacer struct {
	clock   Clock
	mu      sync.Mutex
	speed   float64
	paused  bool
	started bool
	wall    time.Time
	pos     time.Time
	changed chan struct{} // closed and replaced on every change, to wake wait
}

// start puts the playhead at pos, the first time it is called.
func (p *pacer) start(pos time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return
	}
	p.started, p.pos = true, pos
	if p.speed < MaxSpeed {
		p.wall = p.clock.Now()
	}
}

// playhead is the recording time now; p.mu is held.
func (p *pacer) playhead(now time.Time) time.Time {
	if p.paused || p.speed >= MaxSpeed {
		return p.pos
	}
	return p.pos.Add(time.Duration(float64(now.Sub(p.wall)) * p.speed))
}

// change applies f at the current playhead and wakes wait; it reads the
// clock here, in the caller's goroutine, so the playhead stops where it was
// when Pause was called.
func (p *pacer) change(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		now := p.clock.Now()
		p.pos, p.wall = p.playhead(now), now
	}
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *pacer) pause(paused bool)      { p.change(func() { p.paused = paused }) }
func (p *pacer) setSpeed(speed float64) { p.change(func() { p.speed = speed }) }

// emitted moves a playhead that does not run with the clock (at MaxSpeed)
// to the event just emitted.
func (p *pacer) emitted(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started && p.speed >= MaxSpeed && at.After(p.pos) {
		p.pos = at
	}
}

// wait returns when the playhead reaches at, or ctx ends.
func (p *pacer) wait(ctx context.Context, at time.Time) error {
	for {
		d, paused, changed := p.until(at)
		if !paused && d <= 0 {
			return ctx.Err()
		}
		var due <-chan time.Time
		if !paused {
			due = p.clock.After(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-due:
		}
	}
}

// until says how long the clock must run for the playhead to reach at.
func (p *pacer) until(at time.Time) (d time.Duration, paused bool, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return 0, true, p.changed
	}
	if p.speed >= MaxSpeed {
		return 0, false, p.changed
	}
	ahead := at.Sub(p.playhead(p.clock.Now()))
	return time.Duration(float64(ahead) / p.speed), false, p.changed
}
