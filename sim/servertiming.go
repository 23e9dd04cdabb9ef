package sim

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ServerTimingHeader is the W3C Server-Timing header (and trailer) the
// simulator reports each stream's stages in, as real servers and proxies
// do: the stages known when the headers leave go in the header, those of
// the first frame in a trailer. The names are the ones latscope maps
// (probe.ServerTimingNames); the simulator's own extras (loop_wait,
// fault_delay, other) are names latscope does not know, shown as the
// server's own stages.
const ServerTimingHeader = "Server-Timing"

// ProxyStartHeader carries, from the simulator's proxy to the server
// behind it, when the proxy took the request (Unix nanoseconds, the same
// clock in one process): the server's truth then holds the proxy's part.
const ProxyStartHeader = "X-Latscope-Proxy-Start"

// msMetric is one Server-Timing metric of us microseconds.
func msMetric(name string, us int64) string {
	return fmt.Sprintf("%s;dur=%d.%03d", name, us/1000, us%1000)
}

// headerTiming is the Server-Timing of a stream's headers, written just
// before they leave: the front end's stages and the time to the headers.
func headerTiming(r *request, now time.Time) string {
	span := func(a, b time.Time) int64 {
		if a.IsZero() || b.IsZero() || b.Before(a) {
			return 0
		}
		return b.Sub(r.arrival).Microseconds() - a.Sub(r.arrival).Microseconds()
	}
	return strings.Join([]string{
		msMetric("http", span(r.arrival, r.bodyRead)+span(r.parseStart, r.httpEnd)),
		msMetric("tokenize", span(r.tokStart, r.tokEnd)),
		msMetric("headers", span(r.arrival, now)),
	}, ", ")
}

// trailerTiming is the Server-Timing trailer of a stream: every stage of
// its first frame (the truth's), and the time to it.
func trailerTiming(t Truth) string {
	metrics := []string{
		msMetric("http", t.HTTPUs), msMetric("loop_wait", t.LoopWaitUs), msMetric("tokenize", t.TokenizeUs),
	}
	if t.FaultDelayUs > 0 {
		metrics = append(metrics, msMetric("fault_delay", t.FaultDelayUs))
	}
	if t.Disagg {
		metrics = append(metrics, msMetric("prefill_queue", t.PrefillQueueUs), msMetric("prefill", t.PrefillUs),
			msMetric("kv_transfer", t.KVTransferUs), msMetric("decode_queue", t.DecodeQueueUs))
	} else {
		metrics = append(metrics, msMetric("queue", t.QueueUs), msMetric("prefill", t.PrefillUs))
	}
	metrics = append(metrics, msMetric("first_decode", t.FirstDecodeUs),
		msMetric("detokenize", t.DetokenizeUs), msMetric("sse_framing", t.FramingUs), msMetric("other", t.OtherUs),
		msMetric("first_frame", t.ArrivalToFirstFrameUs), msMetric("decode", t.DecodeUs))
	return strings.Join(metrics, ", ")
}

// setTrailerTiming sets a stream's Server-Timing trailer; it is sent when
// the handler returns.
func setTrailerTiming(w http.ResponseWriter, t Truth) {
	w.Header().Set(http.TrailerPrefix+ServerTimingHeader, trailerTiming(t))
}
