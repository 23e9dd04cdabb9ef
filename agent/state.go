package agent

import (
	"time"

	"github.com/latscope/latscope/event"
)

// State is where an attach client stands with its agent, for the screen.
type State int

// The states. A client starts Connecting, is Streaming while connected,
// Reconnecting between connections, and ends Ended (the agent's session
// finished), Stopped (its context ended), Failed (an error that retrying
// cannot fix: a refused token, something that is not a latscope agent, a
// stream it cannot read) or GaveUp (never reached within
// ClientConfig.GiveUp).
const (
	Connecting State = iota
	Streaming
	Reconnecting
	Ended
	Stopped
	Failed
	GaveUp
)

func (s State) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Streaming:
		return "streaming"
	case Reconnecting:
		return "reconnecting"
	case Ended:
		return "ended"
	case Stopped:
		return "stopped"
	case Failed:
		return "failed"
	case GaveUp:
		return "gave up"
	}
	return "unknown"
}

// Status is a client's state with the details a screen shows. Its times
// are the local clock's: they describe the connection, never the agent's
// events.
type Status struct {
	Name  string // the session header's Name, else its Host, else the agent URL's host
	URL   string // the agent's events URL, credentials removed
	State State
	Since time.Time // when State began
	// Err is why the last connection ended (Reconnecting) or why the client
	// gave up (Failed, GaveUp).
	Err string
	// LastErr is the latest connection error, kept in every state after it
	// (a client stopped while it retried still says why it could not connect).
	LastErr string
	// Attempt counts failed connections in a row; RetryAt is when the next
	// one is tried (Reconnecting only).
	Attempt int
	RetryAt time.Time
	LastID  uint64 // the agent's id of the last event received
	Events  int64  // events received, over all connections
	Lost    int64  // events the stream's Loss records announce as missed
	// Connections counts successful connections; Restarts counts those that
	// found the agent had restarted (its ids began again at 1).
	Connections int64
	Restarts    int64
	// DownSince is when the last connection ended, while no other has
	// taken its place; it is kept once the client stops, so a client
	// stopped while it retried still says it had lost its agent. Zero while
	// streaming and before the first connection.
	DownSince time.Time
	// Duplicates counts events dropped for an id no greater than one
	// already received (ids went backwards); a latscope agent never sends
	// any. The client announces them with Loss records (event.ConsumerAttach).
	Duplicates int64
	// Region and Shard are what the agent says of itself in its clock
	// reading (its --region and --shard); empty when it gave none.
	Region, Shard string
	// Clock is the agent's clock offset as last estimated, at the start of
	// a connection (ClientConfig.ClockPings), valid when ClockKnown;
	// ClockEstimates counts the estimates tried and ClockErr says why the
	// latest failed (the last known offset is kept).
	Clock          ClockOffset
	ClockKnown     bool
	ClockEstimates int
	ClockErr       string
}

func (c *Client) countDuplicate() {
	c.mu.Lock()
	c.st.Duplicates++
	c.mu.Unlock()
}

// received updates the status with one emitted event.
func (c *Client) received(ev event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Events++
	c.st.LastID = c.lastID
	switch {
	case ev.Loss != nil && ev.Loss.Consumer != event.ConsumerRecorder:
		// The agent's recording missing events is no loss of the stream's.
		c.st.Lost += ev.Loss.Events
	case ev.Session != nil:
		switch {
		case ev.Session.Name != "":
			c.st.Name, c.named = ev.Session.Name, true
		case ev.Session.Host != "":
			c.st.Name, c.named = ev.Session.Host, true
		}
	}
}

func (c *Client) setState(s State, err error) {
	c.mu.Lock()
	c.st.State, c.st.Since = s, time.Now()
	c.st.Err = ""
	switch {
	case s == Streaming:
		c.st.DownSince = time.Time{}
	case (s == Reconnecting || s == Failed) && c.st.Connections > 0 && c.st.DownSince.IsZero():
		c.st.DownSince = c.st.Since
	}
	if err != nil {
		c.st.Err = err.Error()
		c.st.LastErr = c.st.Err
	}
	if s != Reconnecting {
		c.st.Attempt, c.st.RetryAt = 0, time.Time{}
	}
	st := c.st
	c.mu.Unlock()
	if c.cfg.OnState != nil {
		c.cfg.OnState(st)
	}
}

func (c *Client) setReconnecting(err error, attempt int, at time.Time) {
	c.mu.Lock()
	c.st.Attempt, c.st.RetryAt = attempt, at
	c.mu.Unlock()
	c.setState(Reconnecting, err)
}
