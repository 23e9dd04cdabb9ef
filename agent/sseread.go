package agent

import (
	"bufio"
	"io"

	"github.com/latscope/latscope/internal/sse"
)

// The attach client reads the agent's text/event-stream with the shared
// WHATWG reader (internal/sse, which the probe uses too and which is fuzzed
// there). Why not a library: r3labs/sse/v2's client leaks a goroutine per
// unsubscribe, keeps retrying after its context ends while the server is
// down, and fails on an event over 64 KiB unless told otherwise;
// tmaxmax/go-sse's reader would do, but the reconnection, resume and
// restart logic is ours either way. One event is bounded by a limit, so a
// hostile or broken stream cannot make it allocate without bound.

// errEventTooLarge matches the error for an event over the reader's limit.
var errEventTooLarge = sse.ErrTooLarge

// sseEvent is one dispatched event. Data is valid until the next call to next.
type sseEvent struct {
	Type  string // "" means "message"
	Data  []byte
	ID    string // the last event id as of this event
	HasID bool   // the stream has set an id
}

type sseReader struct{ r *sse.Reader }

func newSSEReader(r io.Reader, limit int) *sseReader {
	return &sseReader{r: sse.NewReader(bufio.NewReaderSize(r, 32<<10), limit)}
}

// next returns the next event, io.EOF at the end of the stream (a partial
// event there is discarded), or the read error.
func (r *sseReader) next() (sseEvent, error) {
	ev, err := r.r.Next()
	if err != nil {
		return sseEvent{}, err
	}
	return sseEvent{Type: string(ev.Type), Data: ev.Data, ID: string(ev.ID), HasID: ev.HasID}, nil
}
