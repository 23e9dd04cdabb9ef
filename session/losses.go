package session

import (
	"context"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// lossSource is an aux source that announces, in the stream, what a
// consumer lost (events a recording could not write, spans a collector did
// not get) as it is lost: a Loss record at the first loss, then at most one
// every `every` while the count grows. signal says a loss happened; poll
// also looks on that beat without one (an export queue drops without a
// signal). When the pipeline stops the source, what is left is announced:
// the pipeline waits for aux sources before it closes. The aggregator
// counts the records live and for the summary, a recording keeps them and
// an agent publishes them. announce returns the record of what was lost
// since the last one, dated at, if anything was.
func lossSource(signal <-chan struct{}, every time.Duration, poll bool, announce func(at time.Time) (event.Event, bool), stamp func() time.Time) pipeline.Source {
	return pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		say := func() {
			if ev, ok := announce(stamp()); ok {
				emit(ev)
			}
		}
		var beat <-chan time.Time
		if poll {
			tick := time.NewTicker(every)
			defer tick.Stop()
			beat = tick.C
		}
		for {
			select {
			case <-signal:
			case <-beat:
			case <-ctx.Done():
				say()
				return nil
			}
			say()
			wait := time.NewTimer(every) // at most one record a beat
			select {
			case <-wait.C:
			case <-ctx.Done():
				wait.Stop()
			}
		}
	})
}
