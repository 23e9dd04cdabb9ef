package probe

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// SourceServerTiming names the timings read from W3C Server-Timing headers
// and trailers (event.ServerTiming.Source).
const SourceServerTiming = "server-timing"

// EnvoyUpstreamHeader is Envoy's report of the upstream's time, in whole
// milliseconds: read as the proxy's upstream time.
const EnvoyUpstreamHeader = "X-Envoy-Upstream-Service-Time"

// Limits on what one response's Server-Timing may add, so a hostile header
// cannot grow a record without bound.
const (
	maxServerTimingMetrics = 64 // metrics read per response
	maxUnknownMetrics      = 16 // of them, kept under their own names
	maxMetricName          = 40 // longer unknown names are dropped
	// maxServerTimingBytes is how much of one header value is read: far
	// more than 64 metrics take, so a huge one costs no more than that.
	maxServerTimingBytes = 16 << 10
)

// ServerTimingNames is the documented mapping from Server-Timing metric
// names (lower case, '-' read as '_') to the stages latscope files them
// under. A name not listed is kept under event.ServerTimingPrefix + name,
// as a server-reported stage of its own. The proxy names carry what a
// proxy reports up to the upstream's response headers, the upstream's time
// included (nginx's $upstream_header_time); `headers` is the server's own
// time from the request's arrival to those headers, so the proxy's stage is
// the first less the second. `first_frame` is the server's time from the
// request's arrival to its first content frame's flush.
func ServerTimingNames() map[string]event.Stage {
	return map[string]event.Stage{
		"proxy": event.StageProxyUpstream, "lb": event.StageProxyUpstream, "upstream": event.StageProxyUpstream,
		"edge": event.StageProxyUpstream, "gateway": event.StageProxyUpstream,
		"http": event.StageHTTP, "parse": event.StageHTTP,
		"tokenize": event.StageTokenize, "tokenization": event.StageTokenize, "validation": event.StageTokenize,
		"queue": event.StageQueue, "queue_wait": event.StageQueue,
		"prefill": event.StagePrefill, "prompt_eval": event.StagePrefill,
		"first_decode":  event.StageFirstDecode,
		"prefill_queue": event.StagePrefillQueue, "kv_transfer": event.StageKVTransfer,
		"kv_cache_transfer": event.StageKVTransfer, "decode_queue": event.StageDecodeQueue,
		"decode":     event.StageDecode,
		"detokenize": event.StageDetokenize, "detok": event.StageDetokenize,
		"sse_framing": event.StageSSEFraming, "framing": event.StageSSEFraming,
		"inference":   event.StageInference,
		"ttft":        event.StageServerTTFT,
		"headers":     event.StageServerHeaders,
		"first_frame": event.StageServerFirstFrame,
	}
}

// ServerTimingMetric is one metric of a Server-Timing header.
type ServerTimingMetric struct {
	Name   string
	Dur    float64 // milliseconds; HasDur says whether it was given
	HasDur bool
	Desc   string
}

// ParseServerTiming reads the metrics of Server-Timing header values (each a
// comma-separated list, as W3C Server Timing defines), in order, at most
// maxServerTimingMetrics. A malformed metric is skipped, never fatal.
func ParseServerTiming(values []string) []ServerTimingMetric {
	var out []ServerTimingMetric
	for _, v := range values {
		if len(v) > maxServerTimingBytes {
			// Cut at a comma, so that no metric is read cut short.
			v = v[:strings.LastIndexByte(v[:maxServerTimingBytes], ',')+1]
		}
		for _, item := range splitOutsideQuotes(v, ',') {
			if len(out) == maxServerTimingMetrics {
				return out
			}
			if m, ok := parseMetric(item); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

func parseMetric(item string) (ServerTimingMetric, bool) {
	parts := splitOutsideQuotes(item, ';')
	m := ServerTimingMetric{Name: strings.TrimSpace(parts[0])}
	if !isToken(m.Name) {
		return m, false
	}
	for _, p := range parts[1:] {
		name, value, _ := strings.Cut(p, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		value = unquote(strings.TrimSpace(value))
		switch name {
		case "dur":
			if m.HasDur {
				continue // the first one counts
			}
			if d, err := strconv.ParseFloat(value, 64); err == nil && !math.IsNaN(d) && !math.IsInf(d, 0) {
				m.Dur, m.HasDur = d, true
			}
		case "desc":
			if m.Desc == "" {
				m.Desc = value
			}
		}
	}
	return m, true
}

// splitOutsideQuotes splits s at sep, except inside a quoted string.
func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	quoted, escaped, from := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[from:i])
			from = i + 1
		}
	}
	return append(out, s[from:])
}

func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		if u, err := strconv.Unquote(v); err == nil {
			return u
		}
		return v[1 : len(v)-1]
	}
	return v
}

// isToken reports whether s is an HTTP token (RFC 9110), the form of a
// metric name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// serverTimingOf turns the Server-Timing metrics of h (and Envoy's
// upstream time) into a server timing by ServerTimingNames; nil when h
// holds none with a duration. Of several proxy metrics the longest, the
// outermost hop's, counts; of other repeats, the first.
func serverTimingOf(h http.Header) *event.ServerTiming {
	if h == nil {
		return nil
	}
	names := ServerTimingNames()
	st := &event.ServerTiming{Source: SourceServerTiming, Stages: map[event.Stage]time.Duration{}}
	unknown := 0
	for _, m := range ParseServerTiming(h.Values("Server-Timing")) {
		if !m.HasDur {
			continue
		}
		d := msDuration(m.Dur)
		if d < 0 {
			continue // negative or absurd: not a duration
		}
		name := strings.ReplaceAll(strings.ToLower(m.Name), "-", "_")
		stage, known := names[name]
		if !known {
			if len(name) > maxMetricName || unknown == maxUnknownMetrics {
				continue
			}
			stage = event.Stage(event.ServerTimingPrefix + name)
		}
		prev, seen := st.Stages[stage]
		switch {
		case !seen:
			if !known {
				unknown++
			}
			st.Stages[stage] = d
		case stage == event.StageProxyUpstream && d > prev:
			st.Stages[stage] = d
		}
	}
	if _, ok := st.Stages[event.StageProxyUpstream]; !ok {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get(EnvoyUpstreamHeader)), 64); err == nil {
			if d := msDuration(ms); d >= 0 {
				st.Stages[event.StageProxyUpstream] = d
			}
		}
	}
	if len(st.Stages) == 0 {
		return nil
	}
	return st
}
