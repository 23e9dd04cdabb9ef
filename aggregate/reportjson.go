package aggregate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/latscope/latscope/event"
)

// WriteJSON prints s as one JSON object: the Summary's own shape (see its
// field tags), with the top-level keys session, start, end, requests, ttft,
// itl, tpot, e2e, tok_per_s_per_request, sched_lag, by_length, stages, breakdown,
// server, gpu, markers, insights (and lost, when events were lost, and
// unrecorded, when the recording could not write some).
// Latencies are milliseconds as floats
// ({count,mean,stddev,min,p50,p90,p95,p99,p99_9,max}).
func WriteJSON(w io.Writer, s Summary) error {
	if s.Insights == nil {
		s.Insights = []event.Marker{}
	}
	if s.Stages == nil {
		s.Stages = map[event.Stage]Stats{}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the summary as JSON: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write the JSON summary: %w", err)
	}
	return nil
}

// round3 keeps microsecond resolution for milliseconds and drops float
// noise; JSON cannot hold NaN or infinities, so they become 0.
func round3(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return math.Round(f*1000) / 1000
}

// MarshalJSON writes the statistics rounded to microseconds.
func (s Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	p := plain{Count: s.Count, Mean: round3(s.Mean), Stddev: round3(s.Stddev), Min: round3(s.Min),
		P50: round3(s.P50), P90: round3(s.P90), P95: round3(s.P95), P99: round3(s.P99), P999: round3(s.P999), Max: round3(s.Max),
		Negative: s.Negative}
	return json.Marshal(p)
}

// MarshalJSON adds duration_s, the run's length in seconds.
func (r Requests) MarshalJSON() ([]byte, error) {
	type plain Requests
	p := plain(r)
	p.ReqPerSec, p.OKPerSec, p.TokPerSec = round3(r.ReqPerSec), round3(r.OKPerSec), round3(r.TokPerSec)
	return json.Marshal(struct {
		plain
		DurationS float64 `json:"duration_s"`
	}{p, round3(r.Duration.Seconds())})
}

// MarshalJSON writes the gauge rounded, with its figures only when it was
// ever reported.
func (g Gauge) MarshalJSON() ([]byte, error) {
	if !g.Seen {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		Mean float64 `json:"mean"` // time-weighted
		Peak float64 `json:"peak"`
		Last float64 `json:"last"`
	}{round3(g.Mean), round3(g.Peak), round3(g.Last)})
}

// MarshalJSON writes the stage's statistics beside its share and
// provenance (Stats' own MarshalJSON would otherwise be the whole output).
func (b BreakdownStage) MarshalJSON() ([]byte, error) {
	provs := b.Provenance
	if provs == nil {
		provs = []event.Provenance{}
	}
	return json.Marshal(struct {
		Count      int64              `json:"count"`
		Mean       float64            `json:"mean"`
		Stddev     float64            `json:"stddev"`
		Min        float64            `json:"min"`
		P50        float64            `json:"p50"`
		P90        float64            `json:"p90"`
		P95        float64            `json:"p95"`
		P99        float64            `json:"p99"`
		P999       float64            `json:"p99_9"`
		Max        float64            `json:"max"`
		Negative   int64              `json:"negative"` // values below zero, kept as they are
		Share      float64            `json:"share"`
		Provenance []event.Provenance `json:"provenance"`
		Main       event.Provenance   `json:"main_provenance"` // of more than half the values, or "mixed"
		Mix        ProvenanceMix      `json:"provenance_count"`
	}{b.Count, round3(b.Mean), round3(b.Stddev), round3(b.Min), round3(b.P50), round3(b.P90), round3(b.P95), round3(b.P99), round3(b.P999), round3(b.Max), b.Negative, round3(b.Share), provs, b.Mix.Main(), b.Mix})
}

// MarshalJSON writes the host's shares and cores rounded to three
// decimals (a mean of shares carries float noise).
func (h HostStats) MarshalJSON() ([]byte, error) {
	type plain HostStats
	p := plain(h)
	for _, f := range []*float64{&p.PSIMean, &p.PSIMax, &p.BusyPSIMean, &p.StealMean, &p.StealMax, &p.SelfCPUMean} {
		*f = round3(*f)
	}
	return json.Marshal(p)
}
