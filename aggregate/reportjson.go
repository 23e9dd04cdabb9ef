package aggregate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/latscope/latscope/event"
)

// jsonReport is the one JSON object WriteJSON prints. Every duration is in
// milliseconds as a float.
type jsonReport struct {
	Requests  jsonRequests              `json:"requests"`
	TTFT      jsonStats                 `json:"ttft"`
	ITL       jsonStats                 `json:"itl"`
	TPOT      jsonStats                 `json:"tpot"`
	E2E       jsonStats                 `json:"e2e"`
	Stages    map[event.Stage]jsonStats `json:"stages"`
	Server    jsonServer                `json:"server"`
	Breakdown jsonBreakdown             `json:"breakdown"`
	GPU       *event.GPUSample          `json:"gpu"`
	Markers   jsonMarkers               `json:"markers"`
	Insights  []event.Marker            `json:"insights"`
}

type jsonRequests struct {
	Sent      int64                   `json:"sent"`
	OK        int64                   `json:"ok"`
	Errors    int64                   `json:"errors"`
	ByOutcome map[event.Outcome]int64 `json:"by_outcome"`
	ByStatus  map[int]int64           `json:"by_status"`
	Warmup    int64                   `json:"warmup"`
	DurationS float64                 `json:"duration_s"`
	ReqPerSec float64                 `json:"req_per_s"`
	OKPerSec  float64                 `json:"ok_per_s"`
	TokPerSec float64                 `json:"tok_per_s"`
	TokensOut int64                   `json:"tokens_out"`
	Flags     map[event.Flag]int64    `json:"flags"`
	// PerRequestTokPerSec is each request's output tokens over its E2E, in tokens/s.
	PerRequestTokPerSec jsonStats `json:"per_request_tok_per_s"`
	Clamped             int64     `json:"clamped_values"`
}

type jsonStats struct {
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Count int64   `json:"count"`
}

type jsonGauge struct {
	Mean float64 `json:"mean"`
	Peak float64 `json:"peak"`
}

type jsonServer struct {
	Samples      int64              `json:"samples"`
	Stale        int64              `json:"stale_samples"`
	Dialect      string             `json:"dialect"`
	Source       string             `json:"source"`
	LastStale    bool               `json:"last_stale"`
	LastError    string             `json:"last_error"`
	QueueDepth   *jsonGauge         `json:"queue_depth"` // null when never reported
	Running      *jsonGauge         `json:"running"`
	KVCache      *jsonGauge         `json:"kv_cache"` // fraction 0..1
	StageMeansMS map[string]float64 `json:"stage_means_ms"`
	QueueSlope   float64            `json:"queue_slope_per_s"`
}

type jsonBreakdownStage struct {
	jsonStats
	Share      float64            `json:"share"`
	Provenance []event.Provenance `json:"provenance"`
}

type jsonBreakdown struct {
	Requests          int64                              `json:"requests"`
	Stages            map[event.Stage]jsonBreakdownStage `json:"stages"`
	UnattributedShare float64                            `json:"unattributed_share"`
}

type jsonMarkers struct {
	Counts map[event.MarkerKind]int64 `json:"counts"`
	Recent []event.Marker             `json:"recent"`
}

// round3 keeps microsecond resolution for milliseconds and drops float noise.
func round3(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return math.Round(f*1000) / 1000
}

func toJSONStats(s Stats) jsonStats {
	return jsonStats{Mean: round3(s.Mean), P50: round3(s.P50), P90: round3(s.P90), P99: round3(s.P99), Max: round3(s.Max), Count: s.Count}
}

func toJSONGauge(g Gauge) *jsonGauge {
	if !g.Seen {
		return nil
	}
	return &jsonGauge{Mean: round3(g.Mean), Peak: round3(g.Peak)}
}

// cleanMarkers copies markers with non-finite values dropped (JSON cannot
// encode NaN, and a marker from any source could carry one).
func cleanMarkers(ms []event.Marker) []event.Marker {
	out := make([]event.Marker, 0, len(ms))
	for _, m := range ms {
		if len(m.Values) > 0 {
			vals := make(map[string]float64, len(m.Values))
			for k, v := range m.Values {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					vals[k] = v
				}
			}
			m.Values = vals
		}
		out = append(out, m)
	}
	return out
}

// WriteJSON prints s as one JSON object with the top-level keys requests,
// ttft, itl, tpot, e2e, stages, server, breakdown, gpu, markers and insights.
// Latencies are milliseconds as floats ({mean,p50,p90,p99,max,count}).
func WriteJSON(w io.Writer, s Summary) error {
	r := s.Requests
	rep := jsonReport{
		Requests: jsonRequests{
			Sent: r.Sent, OK: r.OK, Errors: r.Errors, ByOutcome: nonNil(r.ByOutcome), ByStatus: nonNil(r.ByStatus),
			Warmup: r.Warmup, DurationS: round3(s.Duration.Seconds()), ReqPerSec: round3(r.ReqPerSec), OKPerSec: round3(r.OKPerSec),
			TokPerSec: round3(r.TokPerSec), TokensOut: r.TokensOut, Flags: nonNil(r.Flags),
			PerRequestTokPerSec: toJSONStats(s.TokensPerSec), Clamped: r.Clamped,
		},
		TTFT:   toJSONStats(s.TTFT),
		ITL:    toJSONStats(s.ITL),
		TPOT:   toJSONStats(s.TPOT),
		E2E:    toJSONStats(s.E2E),
		Stages: make(map[event.Stage]jsonStats, len(s.Stages)+1),
		Server: jsonServer{
			Samples: s.Server.Samples, Stale: s.Server.Stale, Dialect: s.Server.Dialect, Source: s.Server.Source,
			LastStale: s.Server.LastStale, LastError: s.Server.LastError,
			QueueDepth: toJSONGauge(s.Server.QueueDepth), Running: toJSONGauge(s.Server.Running),
			KVCache: toJSONGauge(s.Server.KVCache), StageMeansMS: make(map[string]float64, len(s.Server.StageMeans)),
			QueueSlope: round3(s.Server.QueueSlope),
		},
		Breakdown: jsonBreakdown{
			Requests:          s.Breakdown.Requests,
			Stages:            make(map[event.Stage]jsonBreakdownStage, len(s.Breakdown.Stages)),
			UnattributedShare: round3(s.Breakdown.UnattributedShare),
		},
		GPU:      s.GPU,
		Markers:  jsonMarkers{Counts: nonNil(s.Markers.Counts), Recent: cleanMarkers(s.Markers.Recent)},
		Insights: cleanMarkers(s.Insights),
	}
	for k, v := range s.Stages {
		rep.Stages[k] = toJSONStats(v)
	}
	if _, ok := rep.Stages[event.StageSchedLag]; !ok && s.SchedLag.Count > 0 {
		rep.Stages[event.StageSchedLag] = toJSONStats(s.SchedLag)
	}
	for k, v := range s.Server.StageMeans {
		rep.Server.StageMeansMS[k] = round3(v)
	}
	for k, v := range s.Breakdown.Stages {
		provs := v.Provenance
		if provs == nil {
			provs = []event.Provenance{}
		}
		rep.Breakdown.Stages[k] = jsonBreakdownStage{jsonStats: toJSONStats(v.Stats), Share: round3(v.Share), Provenance: provs}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func nonNil[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}
