package attribute

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// SourceServerTiming is the per-request source of W3C Server-Timing
// headers and trailers (probe.SourceServerTiming).
const SourceServerTiming = "server-timing"

// SourceServerWindowRest is a network round trip taken as what is left of
// the client's server window once the server's reported time to its first
// frame (and the proxy's stage) are placed.
const SourceServerWindowRest = "server_window_less_first_frame"

// serverTimingStages maps a Server-Timing report onto breakdown stages. The
// named stages (probe.ServerTimingNames) are one to one; the proxy's stage
// is the proxy's upstream time less the server's time to its headers, which
// the proxy's time includes; a metric whose name latscope does not know is
// kept under its own name (event.ServerTimingPrefix), placed after the
// server's known stages. All are ServerReported.
func serverTimingStages(st *event.ServerTiming, cached string) []event.StageTiming {
	var out []event.StageTiming
	if d, src, ok := proxyStage(st); ok {
		out = append(out, event.StageTiming{Stage: event.StageProxy, Duration: d, Provenance: event.ServerReported, Source: src})
	}
	for _, s := range serverBreakdownOrder {
		if s == event.StageProxy {
			continue
		}
		if d, ok := st.Stages[s]; ok && d >= 0 {
			src := SourceServerTiming
			if s == event.StagePrefill {
				src = withNotes(src, cached)
			}
			out = append(out, event.StageTiming{Stage: s, Duration: d, Provenance: event.ServerReported, Source: src})
		}
	}
	var unknown []event.Stage
	for s := range st.Stages {
		if strings.HasPrefix(string(s), event.ServerTimingPrefix) {
			unknown = append(unknown, s)
		}
	}
	slices.Sort(unknown)
	for _, s := range unknown {
		if d := st.Stages[s]; d >= 0 {
			out = append(out, event.StageTiming{Stage: s, Duration: d, Provenance: event.ServerReported,
				Source: SourceServerTiming + " (a name latscope does not know: the server's own stage)"})
		}
	}
	return out
}

// proxyStage is the proxy hop's own time: what the proxy reports up to the
// upstream's response headers less the server's own time to them. It is
// kept when negative (a proxy's millisecond clock can read below the
// server's), said so in its Source. ok is false without both reports.
func proxyStage(st *event.ServerTiming) (d time.Duration, src string, ok bool) {
	proxy, hasProxy := st.Stages[event.StageProxyUpstream]
	server, hasServer := st.Stages[event.StageServerHeaders]
	if !hasProxy || !hasServer || proxy < 0 || server < 0 {
		return 0, "", false
	}
	d = proxy - server
	notes := []string{"the proxy's upstream time less the server's time to its headers"}
	if d < 0 {
		notes = append(notes, "negative: the proxy reported less than the server, its clock's resolution is coarser")
	}
	return d, withNotes(SourceServerTiming, notes...), true
}

// serverTimingNetwork is the round trip where the server reports its time
// from the request's arrival to its first frame's flush: the client's
// server window less that and the proxy's stage. ok is false without that
// report, or when it leaves nothing.
func serverTimingNetwork(window time.Duration, st *event.ServerTiming) (rtt time.Duration, src string, ok bool) {
	if st == nil || st.Source != SourceServerTiming {
		return 0, "", false
	}
	first, has := st.Stages[event.StageServerFirstFrame]
	if !has || first < 0 {
		return 0, "", false
	}
	rest := window - first
	what := "the server's reported arrival to first frame"
	if p, _, ok := proxyStage(st); ok {
		rest -= p
		what += " and the proxy's stage"
	}
	if rest < 0 {
		return 0, "", false
	}
	return rest, fmt.Sprintf("%s (client's server window less %s, halved)", SourceServerWindowRest, what), true
}

// fitUnknownServerTiming keeps a Server-Timing metric of an unknown name in
// the breakdown only where it fits in what the known stages and the round
// trip leave of the server window: nothing says it does not overlap them.
// One that does not fit stays in the request's server timing and is named
// in a note.
func fitUnknownServerTiming(own []event.StageTiming, window, rtt time.Duration) (kept []event.StageTiming, notes []string) {
	unknown := func(s event.StageTiming) bool { return strings.HasPrefix(string(s.Stage), event.ServerTimingPrefix) }
	left := window
	for _, s := range own {
		if !unknown(s) {
			left -= s.Duration
		}
	}
	if rtt <= left {
		left -= rtt
	}
	for _, s := range own {
		if unknown(s) {
			if s.Duration > left {
				notes = append(notes, fmt.Sprintf("server-timing %s (%s) left out: it does not fit the server window",
					strings.TrimPrefix(string(s.Stage), event.ServerTimingPrefix), showDuration(s.Duration)))
				continue
			}
			left -= s.Duration
		}
		kept = append(kept, s)
	}
	return kept, notes
}
