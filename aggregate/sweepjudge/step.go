package sweepjudge

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Mode says how a sweep sets the load.
type Mode string

// The modes.
const (
	// OpenLoop sends Rate requests per second whatever the responses do: a
	// server past its capacity shows a queue that grows without bound.
	OpenLoop Mode = "rate"
	// ClosedLoop runs Concurrency streams, each waiting for its own
	// response: the queue is bounded by the streams, and past capacity only
	// latency grows.
	ClosedLoop Mode = "concurrency"
)

// Load is one step's load: requests per second in open loop, streams in
// closed loop.
type Load struct {
	Mode  Mode    `json:"mode"`
	Value float64 `json:"value"`
}

// Rate is the open-loop rate in requests per second (0 in closed loop).
func (l Load) Rate() float64 {
	if l.Mode != OpenLoop {
		return 0
	}
	return l.Value
}

// Concurrency is the number of closed-loop streams (0 in open loop).
func (l Load) Concurrency() int {
	if l.Mode != ClosedLoop {
		return 0
	}
	return int(math.Round(l.Value))
}

// String formats the load as the markers and tables show it: "12 req/s",
// "8 streams".
func (l Load) String() string {
	if l.Mode == ClosedLoop {
		if n := l.Concurrency(); n == 1 {
			return "1 stream"
		}
		return fmt.Sprintf("%d streams", l.Concurrency())
	}
	return strconv.FormatFloat(RoundLoad(l.Value), 'f', -1, 64) + " req/s"
}

// RoundLoad rounds a load to the four significant digits a plan steps by
// and a table prints: 12, 118.9, 0.25.
func RoundLoad(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, 4-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// StepSpec is one step as the caller's Step function is asked to build it.
type StepSpec struct {
	Index  int  `json:"index"` // 1-based, in the order the steps run
	Load   Load `json:"load"`
	Refine bool `json:"refine,omitempty"` // a bisection step after the coarse ones
}

// Step is one step's result. Latencies are in milliseconds, rates per
// second. Only the measured part counts: requests sent during the warm-up
// and requests cut off when the step ended are counted apart.
type Step struct {
	StepSpec
	Start time.Time `json:"start"` // the step's start marker
	End   time.Time `json:"end"`   // the step's end marker (its source stopped)
	// Measured is the measured part: from the end of the warm-up until the
	// step was decided (steady, saturated, errors or its maximum time).
	Measured time.Duration `json:"measured_ns"`

	// Offered is the rate requests were sent at and Throughput the rate
	// they finished successfully, both over the measured part (a
	// completion counts when it lands in it, whenever it was sent).
	Offered    float64 `json:"offered_per_s"`
	Throughput float64 `json:"ok_per_s"`
	TokPerSec  float64 `json:"tok_per_s"`
	// Goodput is the rate of measured requests that met every latency
	// objective (absent without an SLO).
	Goodput *float64 `json:"goodput_per_s,omitempty"`

	// Sent, OK and Errors count the measured requests (sent after the
	// warm-up, before the step was decided, and not cut off).
	Sent   int64 `json:"sent"`
	OK     int64 `json:"ok"`
	Errors int64 `json:"errors"`
	// ErrorRate is Errors over Sent.
	ErrorRate float64 `json:"error_rate"`
	// Warmup counts requests sent during the warm-up, Cooldown those sent
	// after the step was decided, and Cut those still in flight when the
	// step ended (cancelled): none of them are in the statistics.
	Warmup   int64 `json:"warmup"`
	Cooldown int64 `json:"cooldown"`
	Cut      int64 `json:"cut"`

	TTFT aggregate.Stats `json:"ttft"`
	ITL  aggregate.Stats `json:"itl"`
	TPOT aggregate.Stats `json:"tpot"`
	E2E  aggregate.Stats `json:"e2e"`

	// QueueShare is the queue's share of the mean TTFT breakdown (0..1) and
	// LargestStage the breakdown's largest stage; both only with a
	// breakdown (server timings joined onto the requests).
	HasBreakdown bool        `json:"has_breakdown"`
	QueueShare   float64     `json:"queue_share"`
	LargestStage event.Stage `json:"largest_stage,omitempty"`
	// QueueDepth is the server's mean queue depth over the measured part.
	HasQueueDepth bool    `json:"has_queue_depth"`
	QueueDepth    float64 `json:"queue_depth"`

	// Signals are the trends the step was judged on.
	Signals Signals `json:"signals"`
	// Steady: TTFT and the backlog stopped trending. Saturated: the
	// backlog grew without bound (open loop), or more streams no longer
	// added throughput (closed loop). ErrorsOver: the error rate passed the
	// limit. Interrupted: the sweep was stopped during the step.
	Steady      bool   `json:"steady"`
	Saturated   bool   `json:"saturated"`
	ErrorsOver  bool   `json:"errors_over_limit"`
	Interrupted bool   `json:"interrupted,omitempty"`
	Reason      string `json:"reason"` // why the step ended, in words
	// Failed says why no request succeeded in the step's measured part,
	// neither one sent in it nor one completing in it ("no request
	// succeeded: connection refused by ..."); empty when one did. Such a
	// step measured nothing of the server (it refuses everything, or is
	// gone), so it ends the sweep.
	Failed string `json:"failed,omitempty"`

	// SLO holds each objective checked against the measured requests.
	SLO []Check `json:"slo,omitempty"`
	// Pass: the step was sustainable (not saturated, errors within the
	// limit, not interrupted, some requests succeeded) and met every
	// objective.
	Pass bool `json:"pass"`
}

// Check is one objective checked against a step.
type Check struct {
	Objective string `json:"objective"` // as written: ttft.p99<300ms
	Got       string `json:"got"`       // "241.30ms", "no data"
	Pass      bool   `json:"pass"`
}

// StopsSweep reports whether no higher load is worth trying after s.
func (s *Step) StopsSweep() bool {
	return s.Saturated || s.ErrorsOver || s.Interrupted || s.Failed != ""
}

// MeasuredSuccess reports whether a request succeeded in the measured
// part: one sent in it, or one completing in it (the throughput).
func (s *Step) MeasuredSuccess() bool { return s.OK > 0 || s.Throughput > 0 }

// Verdict is the step's result in a word or two: pass, saturated, errors,
// no success (not one request succeeded), interrupted or fail.
func (s *Step) Verdict() string {
	switch {
	case s.Interrupted:
		return "interrupted"
	case s.Failed != "":
		return "no success"
	case s.Pass:
		return "pass"
	case s.Saturated:
		return "saturated"
	case s.ErrorsOver:
		return "errors"
	}
	return "fail"
}

// MarshalJSON writes a figure the step did not measure (a latency without
// a successful request, rates without a measured part, the queue without
// a breakdown or metrics) as null, not as a 0 that reads as measured.
func (s Step) MarshalJSON() ([]byte, error) {
	type plain Step // without this method
	rated := s.Measured > 0
	return json.Marshal(struct {
		plain
		TTFT       *aggregate.Stats `json:"ttft"`
		ITL        *aggregate.Stats `json:"itl"`
		TPOT       *aggregate.Stats `json:"tpot"`
		E2E        *aggregate.Stats `json:"e2e"`
		Offered    *float64         `json:"offered_per_s"`
		Throughput *float64         `json:"ok_per_s"`
		TokPerSec  *float64         `json:"tok_per_s"`
		ErrorRate  *float64         `json:"error_rate"`
		QueueShare *float64         `json:"queue_share"`
		QueueDepth *float64         `json:"queue_depth"`
	}{
		plain(s), measured(s.TTFT), measured(s.ITL), measured(s.TPOT), measured(s.E2E),
		valueIf(rated, s.Offered), valueIf(rated, s.Throughput), valueIf(rated, s.TokPerSec),
		valueIf(s.Sent > 0, s.ErrorRate), valueIf(s.HasBreakdown, s.QueueShare), valueIf(s.HasQueueDepth, s.QueueDepth),
	})
}

// measured returns st, or nil when nothing was measured.
func measured(st aggregate.Stats) *aggregate.Stats {
	if st.Count == 0 {
		return nil
	}
	return &st
}

// valueIf returns v, or nil when it was not measured.
func valueIf(ok bool, v float64) *float64 {
	if !ok {
		return nil
	}
	return &v
}

// noSuccess says why a step had no successful request (after its warm-up,
// when some succeeded in it): the top error the step's summary kept, else
// that its requests never finished.
func noSuccess(sum aggregate.Summary, cut int64, inWarmup bool) string {
	what := "no request succeeded"
	if inWarmup {
		what += " after the warm-up"
	}
	if top := sum.Requests.TopErrors; len(top) > 0 {
		msg := top[0].Message
		if msg == "" {
			msg = string(top[0].Outcome)
		}
		return what + ": " + msg
	}
	if cut > 0 {
		return fmt.Sprintf("%s: %d still in flight when the step ended (the step is shorter than one request)", what, cut)
	}
	return what + ": none was measured"
}

// checks converts the aggregator's SLO results.
func checks(results []aggregate.SLOResult) []Check {
	out := make([]Check, 0, len(results))
	for _, r := range results {
		out = append(out, Check{Objective: r.Objective.String(), Got: r.GotText, Pass: r.Pass})
	}
	return out
}

// breakdownOf fills the queue share and the largest stage from the mean
// band of the step's TTFT breakdown: the band's stages add up to its TTFT.
func breakdownOf(s *Step, band aggregate.Band) {
	if band.Requests == 0 || band.TTFT <= 0 || len(band.Stages) == 0 {
		return
	}
	s.HasBreakdown = true
	s.QueueShare = band.Stages[event.StageQueue] / band.TTFT
	var top float64
	// Sorted, so a tie between two stages is broken the same way every time.
	for _, stage := range slices.Sorted(maps.Keys(band.Stages)) {
		if v := band.Stages[stage]; v > top {
			top, s.LargestStage = v, stage
		}
	}
}

// markFlatThroughput marks a closed-loop step saturated when it added too
// little throughput over the best of the lower loads: past capacity, more
// streams only wait longer. (In open loop saturation shows as a growing
// backlog instead.)
func markFlatThroughput(s *Step, earlier []Step, tolerance float64) {
	if s.Load.Mode != ClosedLoop || s.Saturated || s.Interrupted || s.Failed != "" {
		return
	}
	var best *Step
	for i := range earlier {
		e := &earlier[i]
		if e.Interrupted || e.Load.Value >= s.Load.Value {
			continue
		}
		if best == nil || e.Throughput > best.Throughput {
			best = e
		}
	}
	if best == nil || best.Throughput <= 0 || s.Throughput >= best.Throughput*(1+tolerance) {
		return
	}
	s.Saturated, s.Pass = true, false
	s.Reason += fmt.Sprintf("; saturated: %.1f ok/s is less than %.0f%% above the %.1f ok/s of %s, so more streams only wait longer",
		s.Throughput, 100*tolerance, best.Throughput, best.Load)
}
