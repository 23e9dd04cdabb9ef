package tui

import (
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/sweep"
)

// Feed is the dashboard's one input. A live run, a replayed recording and a
// set of remote agents all drive the same screen through it.
//
// Frame returns the newest data and a version that changes whenever the
// data does. The screen calls it from its own goroutine on its render tick
// (at most 10 times a second) and draws only when the version moved, so a
// Feed never waits on the screen and the screen never slows measuring.
// Frame must return quickly and must not block.
type Feed interface {
	Frame() (Frame, uint64)
}

// Frame is one moment of a session, as the screen draws it.
type Frame struct {
	// Snapshot is the session; attached to several agents, all of them
	// together. Its Sample is what the requests view lists.
	Snapshot aggregate.Snapshot
	// Sources holds one snapshot per agent when attached to several (each
	// named by its Session.Name); empty otherwise.
	Sources []aggregate.Snapshot
	// Status lists extra states of the sources to show in the header, e.g.
	// "agent eu-1: reconnecting (attempt 3)" or "recorder 2.1 s behind".
	Status []string
	// Agents holds one frame per agent when attached to several: the
	// frame itself is then the fleet, every agent's events in one
	// aggregator (distributions merged exactly, never averaged). A key
	// cycles the fleet and the agents.
	Agents []Frame
	// Agent is what attach learnt of the agent a per-agent frame shows,
	// beside its events (nil in every other frame).
	Agent *AgentInfo
	// Live says, attached to agents, how many of them stream now; nil in
	// every other frame. With none live the figures stopped moving: the
	// screen greys them and says why, instead of showing the last ones as
	// current.
	Live *Liveness
	// Notices are news that is no trouble, e.g. "recording to run.lsr":
	// shown on the status line when no warning is.
	Notices []string
	// Finished is set once the session has ended (the run's last request,
	// the end of a trace or a replay): the screen then says so.
	Finished bool
	// Playback is a replay's position (nil outside a replay).
	Playback *Playback
	// Sweep is the running sweep (nil outside `latscope sweep`): its panel
	// takes the charts' place.
	Sweep *sweep.Progress
}

// AgentInfo is what attach learnt of an agent beside its events: where
// the agent says it measures from, and how far its clock is from this
// machine's (the fleet's timeline moves its events by that).
type AgentInfo struct {
	Region string // its --region; "" when it gave none
	// State is where the agent stands ("live", "lost", "given up", ...:
	// fleet.AgentState); Live is set while it streams.
	State string
	Live  bool
	// ClockKnown says ClockOffset, the agent's clock minus this machine's,
	// was estimated, within ±ClockBound.
	ClockKnown              bool
	ClockOffset, ClockBound time.Duration
}

// Liveness is how many attached agents stream now, and how to say it
// ("2 of 3 agents live").
type Liveness struct {
	Live, Total int
	Text        string
}

// Playback is where a replay stands: its position and the recording's
// length, both from the session's start, and its speed.
type Playback struct {
	Position, Length time.Duration
	Speed            float64 // seconds of recording a second; 0 means 1
	Paused           bool
}

// Notifier is implemented by a feed that can say when it has a new frame
// (a live run's): the screen then waits for that instead of looking ten
// times a second, which on an idle canary is most of what a dashboard
// costs. Changed receives once after one or more new frames; one screen
// may wait on it (a remote viewer's feed hides it: see sshserve). A nil
// channel means the feed cannot say.
type Notifier interface {
	Changed() <-chan struct{}
}

// changesOf is feed's change channel, or nil.
func changesOf(feed Feed) <-chan struct{} {
	if n, ok := feed.(Notifier); ok {
		return n.Changed()
	}
	return nil
}

// Pauser is implemented by a feed that can pause its playback (a replay):
// space toggles it. TogglePause returns whether playback is now paused and
// must return at once.
type Pauser interface {
	TogglePause() (paused bool)
}

// Seeker is implemented by a feed that can move in time (a replay): ← and →
// seek by ten seconds. Seek must return at once; the new position shows in
// a later Frame.
type Seeker interface {
	Seek(by time.Duration)
}

// LiveFeed is the Feed of a live run (or a replay's pass): the
// aggregator's newest snapshot from a pipeline.Latest, its request sample
// with it, and the session's end when the aggregator says its events
// ended (Snapshot.Ended).
type LiveFeed struct {
	snaps *pipeline.Latest[aggregate.Snapshot]
}

// NewLiveFeed returns a feed reading snapshots from snaps.
func NewLiveFeed(snaps *pipeline.Latest[aggregate.Snapshot]) *LiveFeed {
	return &LiveFeed{snaps: snaps}
}

// Changed receives after a new snapshot (see Notifier).
func (f *LiveFeed) Changed() <-chan struct{} { return f.snaps.Changed() }

// Frame returns the newest snapshot.
func (f *LiveFeed) Frame() (Frame, uint64) {
	snap, v := f.snaps.Get()
	return Frame{Snapshot: snap, Finished: snap.Ended}, v
}

// StaticFeed is a Feed that always returns the same frame: for tests, and
// to show a finished session.
type StaticFeed Frame

// Frame returns the frame, version 1.
func (s StaticFeed) Frame() (Frame, uint64) { return Frame(s), 1 }
