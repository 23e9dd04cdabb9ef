package attribute

import (
	"fmt"
	"time"

	"github.com/latscope/latscope/event"
)

// frontEndMemory is how many server waits the front-end floor is the
// lowest of.
const frontEndMemory = 64

// FrontEndFloor is the lowest server wait (front end and queue, not told
// apart by the server) among the last requests that found no queue (the
// queue gauge showed none waiting while they were at the server): what the
// server's HTTP parsing, tokenization and scheduling take without a wait
// for a slot. Where the gauge shows requests waiting, a request's wait
// beyond the floor is its queue, and the floor stays the server's front
// end. A front end slowed by the load itself is then counted as queue:
// the floor is the front end at its quickest.
type FrontEndFloor struct {
	Wait     time.Duration
	Requests int // the waits Wait is the lowest of; 0: no floor
}

// known reports whether there is a floor.
func (f FrontEndFloor) known() bool { return f.Requests > 0 }

// frontEndWaits keeps the last frontEndMemory server waits, a fixed ring.
type frontEndWaits struct {
	waits [frontEndMemory]time.Duration
	n     int // waits held, up to frontEndMemory
	next  int // where the next one goes
}

// add keeps the server wait of one attributed request.
func (f *frontEndWaits) add(wait time.Duration) {
	f.waits[f.next] = wait
	f.next = (f.next + 1) % frontEndMemory
	f.n = min(f.n+1, frontEndMemory)
}

// floor is the lowest of the kept waits.
func (f *frontEndWaits) floor() FrontEndFloor {
	if f.n == 0 {
		return FrontEndFloor{}
	}
	low := f.waits[0]
	for _, w := range f.waits[1:f.n] {
		low = min(low, w)
	}
	return FrontEndFloor{Wait: low, Requests: f.n}
}

// placedWait is one server wait (front end and queue, not told apart by
// the server) as splitWait placed it.
type placedWait struct {
	wait   time.Duration
	stages []event.StageTiming
}

// splitWait places one server wait, front end and queue that the server
// does not tell apart, as source and its notes say it was found. Without requests
// waiting at the server (the queue gauge) it is all server wait, with
// provenance prov. With them, the recent floor of server waits (ev.frontEnd)
// stays the server wait and the rest is the queue, both estimated; without
// a floor yet (no request has found the queue empty) the whole wait is the
// queue, and its Source says so.
func splitWait(wait time.Duration, prov event.Provenance, source string, notes []string, ev queueEvidence) *placedWait {
	p := &placedWait{wait: wait}
	switch {
	case !ev.waiting():
		p.stages = []event.StageTiming{{Stage: event.StageServerWait, Duration: wait, Provenance: prov, Source: withNotes(source, append(notes, ev.note())...)}}
		return p
	case !ev.frontEnd.known():
		p.stages = []event.StageTiming{{Stage: event.StageQueue, Duration: wait, Provenance: event.Estimated,
			Source: withNotes(source, append(notes, ev.note(), "no earlier request found the queue empty to tell the front end apart, so all of it")...)}}
		return p
	}
	front := min(ev.frontEnd.Wait, wait)
	floorNote := fmt.Sprintf("the front end taken as the lowest server wait of the last %d requests that found no queue, %s", ev.frontEnd.Requests, showDuration(ev.frontEnd.Wait))
	p.stages = []event.StageTiming{{Stage: event.StageServerWait, Duration: front, Provenance: event.Estimated,
		Source: withNotes(source, append(notes, floorNote)...)}}
	if q := wait - front; q > 0 {
		p.stages = append(p.stages, event.StageTiming{Stage: event.StageQueue, Duration: q, Provenance: event.Estimated,
			Source: withNotes(source, append(notes, ev.note(), "the wait beyond "+floorNote)...)})
	}
	return p
}
