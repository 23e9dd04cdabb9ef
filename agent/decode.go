package agent

import (
	"fmt"
	"strconv"

	"github.com/latscope/latscope/event"
)

// decoder turns the messages of an agent's stream into events and holds
// the stream to the agent's protocol: every event has a numeric id, ids
// increase, and the data is one valid event.
type decoder struct {
	lastID    uint64
	hasID     bool
	duplicate bool // the last message repeated an id already received
}

// decode returns the event msg carries; ok is false for a message to skip
// (a duplicate, or a frame type this build does not know). It returns
// errEnded for the agent's end frame, and an ErrProtocol error for anything
// it cannot read.
func (d *decoder) decode(msg sseEvent) (ev event.Event, ok bool, err error) {
	d.duplicate = false
	switch msg.Type {
	case "", "message":
	case endEventType:
		return event.Event{}, false, errEnded
	default:
		return event.Event{}, false, nil // a newer agent's frame
	}
	if !msg.HasID {
		return event.Event{}, false, fmt.Errorf("%w: an event without an id", ErrProtocol)
	}
	id, err := strconv.ParseUint(msg.ID, 10, 64)
	if err != nil {
		return event.Event{}, false, fmt.Errorf("%w: event id %q is not a number", ErrProtocol, clip(msg.ID))
	}
	if d.hasID && id <= d.lastID {
		d.duplicate = true
		return event.Event{}, false, nil
	}
	ev, err = event.Unmarshal(msg.Data)
	if err != nil {
		return event.Event{}, false, fmt.Errorf("%w: event %d: %w", ErrProtocol, id, err)
	}
	d.lastID, d.hasID = id, true
	return ev, true, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 32
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
