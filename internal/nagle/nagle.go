// Package nagle recognises Nagle's algorithm's signature in a stream's
// reads: the probe flags a request with it (event.FlagNagleSuspect), and
// the aggregator takes the flag back where the gaps it rests on were a
// pause other streams shared.
package nagle

import (
	"time"

	"github.com/latscope/latscope/event"
)

// nagleGapMin and nagleGapMax bracket the 40 ms delayed-ACK timer that,
// with Nagle's algorithm on the server's socket, holds a small segment back
// until the client acknowledges the one before it.
const (
	nagleGapMin = 36 * time.Millisecond
	nagleGapMax = 44 * time.Millisecond
)

// Nagle's signature is per connection and repeats with the frame pattern:
// a stream is suspect when at least nagleMinHolds of its gaps between reads
// are holds, and they are at least nagleMinShare of those gaps. One gap of
// about 40 ms followed by a coalesced read is what any pause of the whole
// server also leaves behind.
const (
	nagleMinHolds = 3
	nagleMinShare = 0.25
)

// Suspect reports whether a stream's reads show Nagle's signature:
// gaps near 40 ms, each ending in a read that brought several events at
// once (the held segment released with the frames queued behind it),
// repeated over the stream.
func Suspect(chunks []event.Chunk) bool { return Signature(chunks, nil) }

// Signature is Suspect leaving out the gaps that shared names
// (offsets from the request's start): those that fell in a pause other
// streams shared say nothing about this connection.
func Signature(chunks []event.Chunk, shared func(from, to time.Duration) bool) bool {
	holds, gaps := 0, 0
	prev := -1 // the first chunk of the previous read
	for i, c := range chunks {
		if i > 0 && c.At == chunks[i-1].At {
			continue // the same read
		}
		if prev >= 0 {
			from := chunks[prev].At
			gap := c.At - from
			switch {
			case shared != nil && shared(from, c.At):
			case gap >= nagleGapMin && gap <= nagleGapMax && c.Batch > 1:
				holds++
				gaps++
			default:
				gaps++
			}
		}
		prev = i
	}
	return holds >= nagleMinHolds && float64(holds) >= nagleMinShare*float64(gaps)
}
