package aggregate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func stallMarker(cause event.StallCause, pauses, gapMS, longestMS float64) *event.Marker {
	return &event.Marker{Time: base(), Kind: event.MarkerStall, Source: "stall-detector", Cause: cause,
		Message: string(cause), Values: map[string]float64{"pauses": pauses, "gap_ms": gapMS, "longest_gap_ms": longestMS}}
}

func TestStallCauseInsights(t *testing.T) {
	t.Parallel()
	a := New(Config{})
	addAll(a, okReq(base(), 100*time.Millisecond, 0, 1))
	for _, m := range []*event.Marker{
		stallMarker(event.StallPrefillInterference, 8, 200, 28),
		stallMarker(event.StallPrefillInterference, 1, 20, 27),
		stallMarker(event.StallFrontEndBlock, 1, 20, 29), // once: not enough
		stallMarker(event.StallProbeStarved, 1, 50, 60),
		stallMarker(event.StallProbeStarved, 1, 40, 45),
	} {
		a.Add(event.NewMarker(m))
	}
	ins := a.Summary().Insights
	for prefix, values := range map[string]map[string]float64{
		"the streams' 9 shared pauses in 2 stall markers (220 ms in all, longest gap 28.0 ms) were prefill interference": {"pauses": 9, "markers": 2, "paused_ms": 220, "longest_gap_ms": 28},
		"the streams' 2 shared pauses (90 ms in all, longest gap 60.0 ms) were latscope's own":                           {"pauses": 2, "markers": 2, "paused_ms": 90, "longest_gap_ms": 60},
	} {
		m, ok := insightWith(ins, prefix)
		if !ok {
			t.Fatalf("no insight %q in %v", prefix, ins)
		}
		for k, v := range values {
			if m.Values[k] != v {
				t.Errorf("%s: %s = %v, want %v", prefix, k, m.Values[k], v)
			}
		}
	}
	if m, ok := insightWith(ins, "9 shared pauses in 2 stall markers"); ok && !strings.Contains(m.Message, "chunked prefill") {
		t.Errorf("prefill interference insight says nothing to do: %s", m.Message)
	}
	for _, m := range ins {
		if strings.Contains(m.Message, "front-end block") {
			t.Errorf("an insight on one front-end block: %s", m.Message)
		}
	}
}

func TestNagleInsight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flagged, ok int
		want        bool
	}{{5, 20, true}, {4, 20, false}, {0, 20, false}, {5, insightMinRequests - 1, false}} {
		a := New(Config{})
		for i := range tc.ok {
			r := okReq(base().Add(time.Duration(i)*time.Millisecond), 100*time.Millisecond, 0, 1)
			if i < tc.flagged {
				r.Flags = append(r.Flags, event.FlagNagleSuspect)
			}
			addAll(a, r)
		}
		_, got := insightWith(a.Summary().Insights, fmt.Sprintf("%d%% of requests show Nagle's signature", 100*tc.flagged/max(tc.ok, 1)))
		if got != tc.want {
			t.Errorf("%d of %d flagged: insight %v, want %v", tc.flagged, tc.ok, got, tc.want)
		}
	}
}

// The advice names a server's flag only where that server was detected:
// a plain OpenAI-compatible server, or none named, gets the advice alone.
func TestStallAdviceNamesTheDetectedServersFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server   string
		want     []string
		mustNot  []string
		withHead bool
	}{
		{server: "vllm", withHead: true, want: []string{"(vLLM --max-num-batched-tokens)", "(vLLM --api-server-count)"}},
		{server: "openai", withHead: true, mustNot: []string{"vLLM", "--"}},
		{server: "sglang", withHead: true, want: []string{"(SGLang --chunked-prefill-size)"}, mustNot: []string{"vLLM"}},
		{mustNot: []string{"vLLM", "--"}},
	} {
		a := New(Config{})
		if tc.withHead {
			a.Add(event.NewSession(&event.Session{Time: base(), Server: tc.server}))
		}
		addAll(a, okReq(base(), 100*time.Millisecond, 0, 1))
		for range 2 {
			a.Add(event.NewMarker(stallMarker(event.StallPrefillInterference, 1, 20, 28)))
			a.Add(event.NewMarker(stallMarker(event.StallFrontEndBlock, 1, 20, 28)))
		}
		var said []string
		for _, m := range a.Summary().Insights {
			if strings.Contains(m.Message, "prefill interference") || strings.Contains(m.Message, "front-end block") {
				said = append(said, m.Message)
			}
		}
		all := strings.Join(said, "\n")
		if len(said) != 2 {
			t.Fatalf("server %q: insights %q, want one per cause", tc.server, all)
		}
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("server %q: advice %q lacks %q", tc.server, all, w)
			}
		}
		for _, w := range tc.mustNot {
			if strings.Contains(all, w) {
				t.Errorf("server %q: advice %q names %q", tc.server, all, w)
			}
		}
	}
}
