package probe

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestParseServerTiming(t *testing.T) {
	t.Parallel()
	got := ParseServerTiming([]string{
		`miss, db;dur=53, app;dur=47.2`,
		`cache;desc="Cache Read";dur=23.2, total;desc="a, b; c";dur=1.5`,
		`bad name;dur=1, ;dur=2, x;dur=abc, y;dur=NaN, z;dur=3;dur=4, "q";dur=5`,
	})
	want := []ServerTimingMetric{
		{Name: "miss"}, {Name: "db", Dur: 53, HasDur: true}, {Name: "app", Dur: 47.2, HasDur: true},
		{Name: "cache", Dur: 23.2, HasDur: true, Desc: "Cache Read"}, {Name: "total", Dur: 1.5, HasDur: true, Desc: "a, b; c"},
		{Name: "x"}, {Name: "y"}, {Name: "z", Dur: 3, HasDur: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d metrics %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("metric %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	huge := strings.Repeat("x", maxServerTimingBytes-8) + ", a;dur=12, b;dur=3"
	if got := ParseServerTiming([]string{huge}); len(got) != 1 || got[0].Name != strings.Repeat("x", maxServerTimingBytes-8) {
		t.Errorf("a value past the limit gave %d metrics, want only the first, whole (none cut short)", len(got))
	}
	many := strings.Repeat("m;dur=1, ", 1000)
	if n := len(ParseServerTiming([]string{many})); n != maxServerTimingMetrics {
		t.Errorf("a header of 1000 metrics gave %d, want the limit %d", n, maxServerTimingMetrics)
	}
}

// TestServerTimingMapping: the documented names land on their stages,
// unknown names are kept under their own, the outermost proxy counts,
// Envoy's upstream time is the proxy's, and what cannot be a duration is
// dropped.
func TestServerTimingMapping(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Add("Server-Timing", `lb;dur=9.5, Proxy;dur=7, headers;dur=4, http;dur=0.4, Tokenize;dur=1.5, queue;dur=30`)
	h.Add("Server-Timing", `prefill;dur=12.5, first-decode;dur=9, detokenize;dur=0.15, sse_framing;dur=0.1, db;dur=2, cache;desc=hit, neg;dur=-1, first_frame;dur=60`)
	st := serverTimingOf(h)
	want := map[event.Stage]time.Duration{
		event.StageProxyUpstream: 9500 * time.Microsecond, event.StageServerHeaders: 4 * time.Millisecond,
		event.StageHTTP: 400 * time.Microsecond, event.StageTokenize: 1500 * time.Microsecond,
		event.StageQueue: 30 * time.Millisecond, event.StagePrefill: 12500 * time.Microsecond,
		event.StageFirstDecode: 9 * time.Millisecond, event.StageDetokenize: 150 * time.Microsecond,
		event.StageSSEFraming: 100 * time.Microsecond, event.ServerTimingPrefix + "db": 2 * time.Millisecond,
		event.StageServerFirstFrame: 60 * time.Millisecond,
	}
	if st == nil || st.Source != SourceServerTiming {
		t.Fatalf("timing %+v, want source %s", st, SourceServerTiming)
	}
	if len(st.Stages) != len(want) {
		t.Errorf("stages %v, want %v", st.Stages, want)
	}
	for k, d := range want {
		if st.Stages[k] != d {
			t.Errorf("%s = %v, want %v", k, st.Stages[k], d)
		}
	}

	envoy := http.Header{}
	envoy.Set(EnvoyUpstreamHeader, "17")
	if st := serverTimingOf(envoy); st == nil || st.Stages[event.StageProxyUpstream] != 17*time.Millisecond {
		t.Errorf("envoy's upstream time: %+v, want proxy_upstream 17ms", st)
	}
	if st := serverTimingOf(http.Header{"Server-Timing": {"miss, cache;desc=hit"}}); st != nil {
		t.Errorf("no duration anywhere: %+v, want nil", st)
	}
	unknown := http.Header{"Server-Timing": {strings.Repeat("u;dur=1, ", 10) + func() string {
		var b strings.Builder
		for i := range 40 {
			b.WriteString("n" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ";dur=1, ")
		}
		return b.String()
	}()}}
	n := 0
	for k := range serverTimingOf(unknown).Stages {
		if strings.HasPrefix(string(k), event.ServerTimingPrefix) {
			n++
		}
	}
	if n != maxUnknownMetrics {
		t.Errorf("%d unknown names kept, want the limit %d", n, maxUnknownMetrics)
	}
}

// TestClientReadsServerTimingHeaderAndTrailer: over real HTTP, the probe
// files the Server-Timing of the response's headers and of its trailer
// (which arrives after [DONE]) in the record's server timing.
func TestClientReadsServerTimingHeaderAndTrailer(t *testing.T) {
	t.Parallel()
	srv := newWireServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Server-Timing", "http;dur=0.5, headers;dur=2")
		w.Header().Add("Server-Timing", "proxy;dur=2.75")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "data: "+vllmContentChunk+"\n\ndata: "+vllmContentChunk+"\n\ndata: [DONE]\n\n")
		w.Header().Set(http.TrailerPrefix+"Server-Timing", "queue;dur=30, prefill;dur=12.5, warmup;dur=1")
	})
	c := newWireClient(t, srv.URL, DialectOpenAIChat, nil)
	rec := c.Do(context.Background(), wireSpec("st-1", 2))
	if !rec.OK() {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	if rec.Server == nil || rec.Server.Source != SourceServerTiming {
		t.Fatalf("server timing %+v, want source %s", rec.Server, SourceServerTiming)
	}
	for k, d := range map[event.Stage]time.Duration{
		event.StageHTTP: 500 * time.Microsecond, event.StageServerHeaders: 2 * time.Millisecond,
		event.StageProxyUpstream: 2750 * time.Microsecond, event.StageQueue: 30 * time.Millisecond,
		event.StagePrefill: 12500 * time.Microsecond, event.ServerTimingPrefix + "warmup": time.Millisecond,
	} {
		if got, ok := rec.Server.Stages[k]; !ok || got != d {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, d)
		}
	}
}

func FuzzServerTiming(f *testing.F) {
	for _, s := range []string{`a;dur=1`, `a;desc="x,;y";dur=2, b`, `;;;,,,""\`, `q;dur=1e400`, `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st := serverTimingOf(http.Header{"Server-Timing": {s}, EnvoyUpstreamHeader: {s}})
		if st == nil {
			return
		}
		for k, d := range st.Stages {
			if d < 0 || d > maxServerStage {
				t.Errorf("%s = %v: not a duration", k, d)
			}
		}
	})
}
