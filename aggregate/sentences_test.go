package aggregate

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// percentIn finds every "N%" a sentence states.
var percentIn = regexp.MustCompile(`(-?\d+(?:\.\d+)?)%`)

// checkSentences fails on an insight that states a share outside 0–100%
// or a pause total below zero.
func checkSentences(t *testing.T, ins []event.Marker) {
	t.Helper()
	for _, m := range ins {
		for _, x := range percentIn.FindAllStringSubmatch(m.Message, -1) {
			if f, _ := strconv.ParseFloat(x[1], 64); f < 0 || f > 100 {
				t.Errorf("a share of %s%%: %s", x[1], m.Message)
			}
		}
		if strings.Contains(m.Message, "NaN") || strings.Contains(m.Message, "Inf") || strings.Contains(m.Message, "(-") {
			t.Errorf("a number beyond reason: %s", m.Message)
		}
	}
}

// Hostile breakdowns and counts: tokenization far longer than prefill, an
// estimated prefill, negative unattributed time, server queue times past
// the client's TTFT, flags on failed requests. No insight states a share
// past its whole; tokenization past prefill is said as a multiple.
func TestSentencesStayWithinTheirWholes(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		build func(a *Aggregator)
		want  string // an insight that must be there ("" for none)
		not   string
	}{
		{name: "tokenization 221× prefill", build: func(a *Aggregator) {
			withBreakdown(a, 20, map[event.Stage]time.Duration{event.StageTokenize: 221 * ms, event.StagePrefill: ms})
		}, want: "tokenization takes 221.0× as long as prefill", not: "of prefill"},
		{name: "estimated prefill", build: func(a *Aggregator) {
			for i := range 20 {
				r := okReq(base().Add(time.Duration(i)*ms), 100*ms, 0, 1)
				r.Breakdown = []event.StageTiming{
					{Stage: event.StageTokenize, Duration: 30 * ms, Provenance: event.ServerReported},
					{Stage: event.StagePrefill, Duration: 40 * ms, Provenance: event.Estimated},
				}
				addAll(a, r)
			}
		}, not: "prefill ("},
		{name: "negative unattributed", build: func(a *Aggregator) {
			withBreakdown(a, 20, map[event.Stage]time.Duration{event.StagePrefill: 50 * ms, event.StageUnattributed: -80 * ms})
		}, not: "non-model overhead"},
		{name: "server queue past client TTFT", build: func(a *Aggregator) {
			for range 12 {
				addAll(a, okReq(base(), 100*ms, 0, 1))
			}
			a.Add(event.NewServer(&event.ServerSample{Time: base(), Stages: map[string]event.HistStat{
				"queue": {Count: 12, Mean: 300 * ms},
			}}))
		}, not: "queue wait"},
		{name: "flags on failed requests", build: func(a *Aggregator) {
			for i := range 10 {
				r := okReq(base().Add(time.Duration(i)*ms), 100*ms, 0, 1)
				r.Flags = []event.Flag{event.FlagNagleSuspect}
				addAll(a, r)
			}
			for i := range 30 {
				r := errReq(base().Add(time.Duration(i)*ms), event.OutcomeTimeout, 0)
				r.Flags = []event.Flag{event.FlagNagleSuspect}
				addAll(a, r)
			}
		}, want: "100% of requests show Nagle's signature"},
		{name: "stall markers with bad figures", build: func(a *Aggregator) {
			addAll(a, okReq(base(), 100*ms, 0, 1))
			for _, g := range []float64{math.NaN(), -50, math.Inf(-1)} {
				a.Add(event.NewMarker(stallMarker(event.StallFrontEndBlock, -3, g, g)))
			}
		}, want: "the streams' 3 shared pauses (0 ms in all, longest gap 0.0 ms) were"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := New(Config{})
			tc.build(a)
			ins := a.Summary().Insights
			checkSentences(t, ins)
			if tc.want != "" {
				if _, ok := insightWith(ins, tc.want); !ok {
					t.Errorf("no insight %q in %v", tc.want, ins)
				}
			}
			if tc.not != "" {
				for _, m := range ins {
					if strings.Contains(m.Message, tc.not) {
						t.Errorf("unexpected %q: %s", tc.not, m.Message)
					}
				}
			}
		})
	}
}

func TestTokenizeSentence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ratio float64
		want  string
		ok    bool
	}{
		{0.25, "tokenization is 25% of prefill", true},
		{1, "tokenization is 100% of prefill", true},
		{221.38, "tokenization takes 221.4× as long as prefill (22.14 ms against 0.10 ms, mean, whole run", true},
		{math.NaN(), "", false},
		{math.Inf(1), "", false},
		{-0.5, "", false},
	} {
		got, ok := tokenizeSentence(tc.ratio, 22.138, 0.1, "server-reported")
		if ok != tc.ok || !strings.HasPrefix(got, tc.want) {
			t.Errorf("ratio %v: %q %t, want %q %t", tc.ratio, got, ok, tc.want, tc.ok)
		}
	}
}
