package session

import (
	"os"
	"runtime/debug"

	"github.com/latscope/latscope/probe"
)

// From manyStreams closed-loop streams, a run asks the garbage collector to
// keep the heap within half again of what is live (manyStreamsGCPercent)
// rather than Go's default of twice it. With that many streams, most of the
// heap is what each stream holds for its whole life (buffers, the request,
// its record), so the default's headroom is hundreds of megabytes. At
// 10,000 streams on the scale bench, 50 took the probe's peak resident set
// from 800-860 MB to 670 MB with no change in CPU per token event that the
// bench could tell (11.1 against 11.3 µs), the collector being 4% of it.
const (
	manyStreams          = 1000
	manyStreamsGCPercent = 50
)

// GCPercent is the garbage collector's target percentage (as GOGC) that a
// run of load l is best served by, or 0 to keep Go's default.
func GCPercent(l probe.LoadConfig) int {
	peak := l.Concurrency
	switch {
	case len(l.Steps) > 0:
		peak = 0
		for _, s := range l.Steps {
			peak = max(peak, s.Concurrency)
		}
	case l.Rate > 0 || l.Trace != nil:
		peak = 0 // open loop: how many are in flight is the server's to say
	}
	if peak >= manyStreams {
		return manyStreamsGCPercent
	}
	return 0
}

// TuneGC sets the process's garbage collector target to GCPercent(l), unless
// the environment's GOGC says what the user wants. It changes the whole
// process, so only the program that owns it calls this, before the run.
func TuneGC(l probe.LoadConfig) {
	if p := GCPercent(l); p > 0 && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(p)
	}
}
