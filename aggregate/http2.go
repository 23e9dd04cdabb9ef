package aggregate

import (
	"time"

	"github.com/latscope/latscope/event"
)

// HTTP2 sums up the run's HTTP/2 streams (run --http2 or --h2c): present
// only when some request went out as one.
type HTTP2 struct {
	// Connections is how many connections the probe opened: its own
	// count, or, for a recording without it, the highest connection
	// number a stream named.
	Connections int64 `json:"connections"`
	// Streams counts the requests that went out as a stream (warm-up
	// excluded); PerConnection is Streams over Connections.
	Streams       int64   `json:"streams"`
	PerConnection float64 `json:"streams_per_connection"`
	// Flow-control stalls, from the frames (see event.HTTP2Stream): the
	// request bodies' waits for the server's window, and the server's for
	// the client's, with the time waited in all.
	SendStalls    int64         `json:"send_stalls"`
	SendStallWait time.Duration `json:"send_stall_ns"`
	RecvStalls    int64         `json:"recv_stalls"`
	RecvStallWait time.Duration `json:"recv_stall_ns"`
	// GoAwayRetries counts the requests sent again on a new connection
	// after a GOAWAY (or a close) came before their stream was taken.
	GoAwayRetries int64 `json:"goaway_retries"`
}

// h2Tally adds up the HTTP/2 figures of the requests.
type h2Tally struct {
	streams, maxConn, sendStalls, recvStalls, retries int64
	sendWait, recvWait                                time.Duration
}

// add counts r's stream, when it had one.
func (t *h2Tally) add(r *event.Request) {
	h := r.HTTP2
	if h == nil {
		return
	}
	t.streams++
	t.maxConn = max(t.maxConn, int64(h.Conn))
	t.sendStalls += int64(max(h.SendStalls, 0))
	t.recvStalls += int64(max(h.RecvStalls, 0))
	t.sendWait += max(h.SendStallWait, 0)
	t.recvWait += max(h.RecvStallWait, 0)
	if h.GoAwayRetry {
		t.retries++
	}
}

// summary is the run's HTTP/2 figures, with the probe's latest sample p
// (nil: none); nil when no request went out over HTTP/2.
func (t *h2Tally) summary(p *event.ProbeSample) *HTTP2 {
	if t.streams == 0 {
		return nil
	}
	h := &HTTP2{
		Connections: t.maxConn, Streams: t.streams,
		SendStalls: t.sendStalls, SendStallWait: t.sendWait, RecvStalls: t.recvStalls, RecvStallWait: t.recvWait,
		GoAwayRetries: t.retries,
	}
	if p != nil && p.H2Connections > 0 {
		h.Connections = p.H2Connections
		h.GoAwayRetries = max(h.GoAwayRetries, p.H2GoAwayRetries)
	}
	if h.Connections > 0 {
		h.PerConnection = float64(h.Streams) / float64(h.Connections)
	}
	return h
}
