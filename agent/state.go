package agent

import "time"

// State is where an attach client stands with its agent, for the screen.
type State int

// The states. A client starts Connecting, is Streaming while connected,
// Reconnecting between connections, and ends Ended (the agent's session
// finished), Stopped (its context ended) or Failed (an error that retrying
// cannot fix: a refused token, something that is not a latscope agent, a
// stream it cannot read).
const (
	Connecting State = iota
	Streaming
	Reconnecting
	Ended
	Stopped
	Failed
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
	}
	return "unknown"
}

// Status is a client's state with the details a screen shows. Its times
// are the local clock's: they describe the connection, never the agent's
// events.
type Status struct {
	Name  string // the session header's Name, else the agent's host
	URL   string // the agent's events URL, credentials removed
	State State
	Since time.Time // when State began
	// Err is why the last connection ended (Reconnecting) or why the client
	// gave up (Failed).
	Err string
	// Attempt counts failed connections in a row; RetryAt is when the next
	// one is tried (Reconnecting only).
	Attempt int
	RetryAt time.Time
	LastID  uint64 // the agent's id of the last event received
	Events  int64  // events received, over all connections
	Lost    int64  // events the agent announced as lost (its gap records)
	// Connections counts successful connections; Restarts counts those that
	// found the agent had restarted (its ids began again at 1).
	Connections int64
	Restarts    int64
	// Duplicates counts events dropped for repeating an id already
	// received; a latscope agent never sends any.
	Duplicates int64
}
