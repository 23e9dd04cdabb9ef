package report

import (
	"encoding/json"
	"math"
	"time"

	"github.com/latscope/latscope/aggregate"
)

// maxPoints bounds the points of a time series, so a chart of an hour-long
// session stays light.
const maxPoints = 300

// steps are the intervals a series may use, shortest first: the shortest
// that gives at most maxPoints points over the session is taken.
var steps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
}

// Series is a run over time: one point every Step, each taken from an
// aggregator snapshot at that moment of the replay.
type Series struct {
	Step time.Duration
	// Window is the aggregator window each point's percentiles and rates
	// cover: the 10 s before it for steps up to 10 s, about the last minute
	// for steps up to a minute, else about the last 5 minutes.
	Window aggregate.Window
	Points []Point
}

// Point is the state of the run at one moment. Latencies are in ms, rates
// per second; a value that was not known then is NaN (null in JSON).
type Point struct {
	At               time.Duration // since the session's start
	TTFTP50, TTFTP99 float64       // over Series.Window
	ITLP50, ITLP99   float64       // over Series.Window
	// Waiting and Running are the server's latest queue depth and batch
	// size; InFlight is the probe's latest count of requests in flight.
	Waiting, Running, InFlight float64
	OKPerSec, TokPerSec        float64 // over Series.Window
}

func chooseStep(d time.Duration) time.Duration {
	for _, s := range steps {
		if d <= s*maxPoints {
			return s
		}
	}
	return (d/maxPoints + time.Hour).Truncate(time.Hour)
}

func windowFor(step time.Duration) aggregate.Window {
	switch {
	case step <= 10*time.Second:
		return aggregate.Win10s
	case step <= time.Minute:
		return aggregate.Win1m
	}
	return aggregate.Win5m
}

// pointOf reads one point from a snapshot taken at the point's time.
func pointOf(snap aggregate.Snapshot, w aggregate.Window, at time.Duration) Point {
	nan := math.NaN()
	p := Point{At: at, TTFTP50: nan, TTFTP99: nan, ITLP50: nan, ITLP99: nan,
		Waiting: nan, Running: nan, InFlight: nan, OKPerSec: nan, TokPerSec: nan}
	ws := snap.Windows[w]
	if ws.TTFT.Count > 0 {
		p.TTFTP50, p.TTFTP99 = ws.TTFT.P50, ws.TTFT.P99
	}
	if ws.ITL.Count > 0 {
		p.ITLP50, p.ITLP99 = ws.ITL.P50, ws.ITL.P99
	}
	if ws.Span > 0 {
		p.OKPerSec, p.TokPerSec = float64(ws.OK)/ws.Span.Seconds(), ws.TokPerSec
	}
	if q := snap.Server.QueueDepth; q.Seen {
		p.Waiting = q.Last
	}
	if r := snap.Server.Running; r.Seen {
		p.Running = r.Last
	}
	if snap.Probe != nil {
		p.InFlight = float64(snap.Probe.InFlight)
	}
	return p
}

// MarshalJSON writes the point with at_s in seconds and unknown values as
// null.
func (p Point) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		AtS       float64  `json:"at_s"`
		TTFTP50   *float64 `json:"ttft_p50_ms"`
		TTFTP99   *float64 `json:"ttft_p99_ms"`
		ITLP50    *float64 `json:"itl_p50_ms"`
		ITLP99    *float64 `json:"itl_p99_ms"`
		Waiting   *float64 `json:"waiting"`
		Running   *float64 `json:"running"`
		InFlight  *float64 `json:"in_flight"`
		OKPerSec  *float64 `json:"ok_per_s"`
		TokPerSec *float64 `json:"tok_per_s"`
	}{p.At.Seconds(), known(p.TTFTP50), known(p.TTFTP99), known(p.ITLP50), known(p.ITLP99),
		known(p.Waiting), known(p.Running), known(p.InFlight), known(p.OKPerSec), known(p.TokPerSec)})
}

// MarshalJSON writes the step in seconds and the window by name.
func (s Series) MarshalJSON() ([]byte, error) {
	points := s.Points
	if points == nil {
		points = []Point{}
	}
	return json.Marshal(struct {
		StepS  float64 `json:"step_s"`
		Window string  `json:"window"`
		Points []Point `json:"points"`
	}{s.Step.Seconds(), s.Window.String(), points})
}

// known returns a pointer to v rounded to microseconds, or nil for NaN and
// infinities, which JSON cannot hold.
func known(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	v = math.Round(v*1000) / 1000
	return &v
}

// rounded is v rounded to microseconds, or 0 when it is not a number.
func rounded(v float64) float64 {
	if p := known(v); p != nil {
		return *p
	}
	return 0
}
