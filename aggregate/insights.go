package aggregate

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// Insight thresholds. An insight is emitted only when its inputs exist (at
// least insightMinRequests requests behind every statistic it uses) and its
// number crosses the threshold below; otherwise it is left out, never shown
// with made-up or thin numbers.
const (
	insightMinRequests = 10

	// "queue wait is N% of TTFT": queue share of TTFT at least 25%.
	queueShareMin = 0.25
	// "tokenization is N% of prefill": at least 10%.
	tokenizeShareMin = 0.10
	// "N% of requests were served largely from the server's prompt cache":
	// at least 5% of the successful requests flagged prompt_cached.
	promptCachedMin = 0.05

	// "non-model overhead is N% of TTFT": everything but queue, prefill and
	// first decode at least 20% of TTFT.
	overheadShareMin = 0.20

	// "arrival rate exceeds completions": arrivals over the last minute at
	// least 10% above completions, and the queue depth rising by at least
	// 0.1 request/s (least squares over at least 5 readings spanning 20 s).
	growthRateRatio = 1.10
	growthSlopeMin  = 0.1
	growthMinPoints = 5
	growthMinSpan   = 20 * time.Second

	// "the server, not the probe, is the limit": the probe kept pace by
	// every piece of evidence (ProbeVerdict) while TTFT tracks queue depth
	// (Pearson r of at least 0.7 between their 10 s means, over at least 3
	// slots of the last 5 minutes).
	queueTTFTCorr   = 0.7
	queueTTFTMinCnt = 3
)

// insightSource names the aggregator as the emitter of its insights.
const insightSource = "aggregate"

func (a *Aggregator) insights(s *Snapshot) []event.Marker {
	var out []event.Marker
	add := func(msg string, values map[string]float64) {
		out = append(out, event.Marker{
			Time: s.Now, Kind: event.MarkerInsight, Source: insightSource, Message: msg, Values: values,
		})
	}
	a.queueShareInsight(s, add)
	a.growthInsight(s, add)
	a.tokenizeInsight(s, add)
	a.promptCacheInsight(s, add)
	a.overheadInsight(s, add)
	a.limitInsight(s, add)
	a.stallInsights(s, add)
	a.nagleInsight(s, add)
	turnsInsight(s, add)
	abandonedInsight(s, add)
	return out
}

type addInsight func(msg string, values map[string]float64)

func pct(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

// bdTTFTMeanMS is the mean TTFT (ms) of the requests with a breakdown.
func (a *Aggregator) bdTTFTMeanMS() float64 {
	if a.bdRequests == 0 {
		return 0
	}
	return float64(a.bdTTFT) / float64(a.bdRequests) / displayFactor
}

// queueShareInsight speaks of queue wait only where the breakdown
// attributed a queue (on evidence: see attribute.Attribute). A breakdown
// without one says the requests did not queue, or that the server wait
// (front end and queue) could not be told apart: no queue insight then,
// not even from the server's queue-time mean, which the breakdown has
// weighed already. Only without any breakdown is that mean used.
func (a *Aggregator) queueShareInsight(s *Snapshot, add addInsight) {
	if q, ok := s.Breakdown.Stages[event.StageQueue]; ok && q.Count >= insightMinRequests && a.bdTTFT > 0 {
		if q.Share >= queueShareMin && q.Share <= 1 {
			add(fmt.Sprintf("queue wait is %s of TTFT (%s; from the breakdown; queue is %s)", pct(q.Share), runMean(), mixWords(q)),
				map[string]float64{
					"share": q.Share, "queue_mean_ms": q.Mean, "ttft_mean_ms": a.bdTTFTMeanMS(),
					"requests": float64(q.Count), "from_breakdown": 1,
				})
		}
		return
	}
	if s.Breakdown.Requests > 0 {
		return
	}
	qm, ok := s.Server.StageMeans["queue"]
	ttft := s.Windows[WinRun].TTFT
	if !ok || ttft.Count < insightMinRequests || ttft.Mean <= 0 {
		return
	}
	share := qm / ttft.Mean
	// The server's queue time and the client's TTFT come from two clocks
	// and two sets of requests: a ratio past 1 is no share of TTFT.
	if share >= queueShareMin && share <= 1 {
		add(fmt.Sprintf("queue wait is %s of TTFT (%s: server queue-time mean over client TTFT mean)", pct(share), runMean()),
			map[string]float64{
				"share": share, "queue_mean_ms": qm, "ttft_mean_ms": ttft.Mean,
				"requests": float64(ttft.Count), "from_breakdown": 0,
			})
	}
}

func (a *Aggregator) growthInsight(s *Snapshot, add addInsight) {
	w := s.Windows[Win1m]
	if w.Span < growthMinSpan {
		return
	}
	// Completions are requests the server finished: failed and cancelled
	// ones (a run's end cancels the queued backlog) are not.
	completions := float64(w.OK) / w.Span.Seconds()
	arrivals, estimated := a.cfg.OfferedRate, 0.0
	if arrivals <= 0 {
		_, from, to, _ := bounds(Win1m, s.Now)
		var n int64
		a.arrivals.each(from, to, func(c *int64) { n += *c })
		arrivals, estimated = float64(n)/w.Span.Seconds(), 1
	}
	slope, points, covered := a.server.queueSlope(s.Now, time.Minute)
	if arrivals <= 0 || arrivals < completions*growthRateRatio ||
		points < growthMinPoints || covered < growthMinSpan || slope < growthSlopeMin {
		return
	}
	add(fmt.Sprintf("arrival rate exceeds completions: the queue grows without bound (%.2f req/s in, %.2f req/s done, queue +%.2f/s)",
		arrivals, completions, slope),
		map[string]float64{
			"arrival_rate": arrivals, "completion_rate": completions, "queue_slope_per_s": slope,
			"arrival_estimated": estimated, "queue_readings": float64(points),
		})
}

// tokenizeInsight compares tokenization with prefill, only where the
// prefill was measured or reported by the server (an estimated prefill is
// no whole to take a share of). Tokenization is not part of prefill, so
// the figure is a ratio: up to 100% it reads as a share ("N% of prefill"),
// beyond it as a multiple with both means, never as a share over 100%.
func (a *Aggregator) tokenizeInsight(s *Snapshot, add addInsight) {
	tok, ok1 := s.Breakdown.Stages[event.StageTokenize]
	pre, ok2 := s.Breakdown.Stages[event.StagePrefill]
	if !ok1 || !ok2 || tok.Count < insightMinRequests || pre.Count < insightMinRequests || pre.Share <= 0 || tok.Share < 0 {
		return
	}
	if !prefillKnown(pre) {
		return
	}
	ratio := tok.Share / pre.Share // the shares have the same denominator
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio < tokenizeShareMin {
		return
	}
	values := map[string]float64{"ratio": ratio, "tokenize_mean_ms": tok.Mean, "prefill_mean_ms": pre.Mean}
	msg, ok := tokenizeSentence(ratio, tok.Mean, pre.Mean, mixWords(pre))
	if ok {
		add(msg, values)
	}
}

// tokenizeSentence words tokenization against prefill; false when the
// ratio is no number to state.
func tokenizeSentence(ratio, tokMS, preMS float64, preFrom string) (string, bool) {
	switch {
	case math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio < 0:
		return "", false
	case ratio <= 1:
		return fmt.Sprintf("tokenization is %s of prefill (%s; prefill %s)", pct(ratio), runMean(), preFrom), true
	}
	return fmt.Sprintf("tokenization takes %.1f× as long as prefill (%.2f ms against %.2f ms, %s; prefill %s): the front end, not the model, holds the first token",
		ratio, tokMS, preMS, runMean(), preFrom), true
}

// prefillKnown reports whether most of a prefill stage's values were
// measured or reported by the server, not estimated.
func prefillKnown(pre BreakdownStage) bool {
	switch pre.Mix.Main() {
	case event.Measured, event.ServerReported:
		return true
	case "":
		// Not counted by provenance: every provenance seen must be direct.
		if len(pre.Provenance) == 0 {
			return false
		}
		for _, p := range pre.Provenance {
			if p != event.Measured && p != event.ServerReported {
				return false
			}
		}
		return true
	}
	return false
}

// promptCacheInsight says how many requests the server answered largely
// from its prompt cache (event.FlagPromptCached): their prefill, and the
// TTFT that holds it, are not those of a cold prompt.
func (a *Aggregator) promptCacheInsight(s *Snapshot, add addInsight) {
	share, cached, ok, enough := flagShare(s, event.FlagPromptCached, promptCachedMin)
	if !enough {
		return
	}
	add(fmt.Sprintf("%s of requests were served largely from the server's prompt cache: their prefill is not a cold prefill (%d of %d had at least half of the prompt cached)",
		pct(share), cached, ok),
		map[string]float64{"share": share, "requests": float64(cached), "ok": float64(ok)})
}

// flagShare is the share of the ok requests flagged flag, the counts it
// comes from, and whether it is worth an insight: enough requests, and a
// share of at least the given one.
func flagShare(s *Snapshot, flag event.Flag, least float64) (share float64, flagged, ok int64, enough bool) {
	ok, flagged = s.Requests.OK, s.Requests.Flags[flag]
	// Flags are counted on every finished request, failed ones too: the
	// whole they are a share of is the finished requests.
	if whole := s.Requests.Finished(); whole > ok {
		ok = whole
	}
	if ok < insightMinRequests || flagged <= 0 || flagged > ok {
		return 0, flagged, ok, false
	}
	share = float64(flagged) / float64(ok)
	return share, flagged, ok, share >= least
}

func (a *Aggregator) overheadInsight(s *Snapshot, add addInsight) {
	b := s.Breakdown
	pre, ok := b.Stages[event.StagePrefill]
	if !ok || b.Requests < insightMinRequests || pre.Count < insightMinRequests {
		return
	}
	model := 0.0
	// The server wait holds the server's front end and any queue, not told
	// apart: it is kept out of the overhead, as the queue is.
	for _, st := range []event.Stage{event.StageServerWait, event.StageQueue, event.StagePrefillQueue, event.StagePrefill,
		event.StageDecodeQueue, event.StageFirstDecode} {
		model += b.Stages[st].Share
	}
	// Unattributed time is unknown, not overhead: keep it out and say how much there is.
	overhead := 1 - model - b.UnattributedShare
	// Negative unattributed time (the sources exceed the client's window)
	// can push the rest past the whole: no share to state then.
	if overhead >= overheadShareMin && overhead <= 1 && b.UnattributedShare >= 0 {
		add(fmt.Sprintf("non-model overhead is %s of TTFT (%s; network, HTTP, tokenization, framing: everything attributed but server wait, queue, prefill and first decode; %s more is unattributed)",
			pct(overhead), runMean(), pct(b.UnattributedShare)),
			map[string]float64{
				"share": overhead, "model_share": model, "unattributed_share": b.UnattributedShare,
				"ttft_mean_ms": a.bdTTFTMeanMS(),
			})
	}
}

// limitInsight says the probe's verdict (ProbeVerdict), the one every
// surface shows: a held probe is the limit, whatever the queue does; a
// probe that paused says so; the server is named the limit only where the
// probe kept pace by all the evidence and TTFT tracks the queue depth.
func (a *Aggregator) limitInsight(s *Snapshot, add addInsight) {
	v := s.Verdict
	switch v.State {
	case ProbeHeld:
		add("the probe is the limit: "+v.Reason,
			map[string]float64{
				"sched_lag_p99_ms": v.LagP99MS, "lag_measured": boolValue(v.LagMeasured),
				"starved_pauses": float64(v.StarvedPauses), "starved_ms": v.StarvedMS,
				"limited_samples": float64(v.LimitedSamples), "limit_markers": float64(v.LimitMarkers),
			})
		return
	case ProbePaused:
		add("the probe paused: "+v.Reason+"; the requests in those pauses include its delay",
			map[string]float64{"starved_pauses": float64(v.StarvedPauses), "starved_ms": v.StarvedMS, "starved_share": v.StarvedShare})
		return
	case ProbeHostBusy:
		add(v.Reason+"; neither the server nor latscope is named the limit",
			map[string]float64{"limited_samples": float64(v.LimitedSamples), "starved_pauses": float64(v.StarvedPauses)})
		return
	case ProbeUnknown:
		return
	}
	r, n := a.queueTTFTCorrelation(s.Now)
	if n < queueTTFTMinCnt || r < queueTTFTCorr {
		return
	}
	values := map[string]float64{"correlation": r, "slots": float64(n), "lag_measured": boolValue(v.LagMeasured)}
	if v.LagRequests > 0 {
		values["sched_lag_p99_ms"] = v.LagP99MS
	}
	add(fmt.Sprintf("the server, not the probe, is the limit: TTFT rises with queue depth (r=%.2f) while the probe kept pace: %s", r, v.Reason), values)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// queueTTFTCorrelation returns Pearson's r between the mean queue depth and
// the mean TTFT of each 10 s slot of the last 5 minutes that has both, and
// the number of such slots. r is 0 when either does not vary.
func (a *Aggregator) queueTTFTCorrelation(now time.Time) (float64, int) {
	_, from, to, _ := bounds(Win5m, now)
	var xs, ys []float64
	for e := from; e <= to; e++ {
		q := a.server.coarse.get(e)
		t := a.ttft.coarse.get(e)
		if q == nil || t == nil || q.waitN == 0 || t.n == 0 {
			continue
		}
		xs = append(xs, q.waitSum/float64(q.waitN))
		ys = append(ys, float64(t.sum)/float64(t.n))
	}
	return pearson(xs, ys), len(xs)
}

func pearson(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= n
	my /= n
	var sxy, sxx, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

// mixWords says where most of a breakdown stage's numbers came from (or
// that they are mixed), so an insight built on estimates says so.
func mixWords(st BreakdownStage) string {
	switch main := st.Mix.Main(); main {
	case "":
		return provenanceWords(st.Provenance)
	case Mixed:
		return "mixed: " + provenanceWords(st.Provenance)
	default:
		if st.Mix.Total() > mixCount(st.Mix, main) {
			return fmt.Sprintf("%s for %d of %d requests", provenanceWords([]event.Provenance{main}), mixCount(st.Mix, main), st.Mix.Total())
		}
		return provenanceWords([]event.Provenance{main})
	}
}

func mixCount(m ProvenanceMix, p event.Provenance) int64 {
	switch p {
	case event.Measured:
		return m.Measured
	case event.ServerReported:
		return m.Server
	case event.Estimated:
		return m.Estimated
	}
	return m.Other
}

// provenanceWords says where a breakdown stage's numbers came from, so an
// insight built on estimates says so.
func provenanceWords(ps []event.Provenance) string {
	if len(ps) == 0 {
		return "of unknown provenance"
	}
	words := make([]string, len(ps))
	for i, p := range ps {
		switch p {
		case event.ServerReported:
			words[i] = "server-reported"
		case event.Estimated:
			words[i] = "estimated"
		default:
			words[i] = string(p)
		}
	}
	return strings.Join(words, " and ")
}
