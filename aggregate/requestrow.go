package aggregate

import (
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
)

// RequestRow is one request as a flat row, for a spreadsheet, pandas or
// DuckDB: what the recording holds about it, and the figures derived from
// it (its inter-token gaps' mean, median and largest), in milliseconds as
// the summary gives them. The summary's TTFT statistics are those of the
// rows with outcome "ok", warmup false and a TTFT.
type RequestRow struct {
	ID      string `json:"id"`
	Seq     uint64 `json:"seq"`
	RunID   string `json:"run_id"`
	Session string `json:"session"` // the session's (an agent's) name
	Region  string `json:"region"`
	Model   string `json:"model"`
	Dialect string `json:"dialect"`
	Warmup  bool   `json:"warmup"`

	Outcome  string `json:"outcome"`
	RunEnded bool   `json:"run_ended"` // cancelled by the run's own end, not failed
	Status   int    `json:"status"`
	Error    string `json:"error"`
	Flags    string `json:"flags"` // ";"-separated

	Intended  time.Time `json:"intended"` // when it was due (wall clock, UTC)
	OffsetS   float64   `json:"offset_s"` // Intended, in seconds from the session's start
	SchedLag  float64   `json:"sched_lag_ms"`
	Connect   float64   `json:"connect_rtt_ms"` // a new connection's round trip; 0 on a reused one
	Reused    bool      `json:"reused_conn"`
	Prompt    int       `json:"prompt_tokens"`
	Cached    int       `json:"cached_tokens"` // prompt tokens from the server's prefix cache, where it says
	Output    int       `json:"output_tokens"`
	Reasoning int       `json:"reasoning_tokens"`
	Chunks    int       `json:"chunks"` // content frames received

	TTFT       float64 `json:"ttft_ms"`
	TTFTAnswer float64 `json:"ttft_answer_ms"` // to the first answer token; = ttft_ms without reasoning
	E2E        float64 `json:"e2e_ms"`
	TPOT       float64 `json:"tpot_ms"`
	ITLMean    float64 `json:"itl_mean_ms"`
	ITLP50     float64 `json:"itl_p50_ms"`
	ITLMax     float64 `json:"itl_max_ms"`
	TokPerS    float64 `json:"tok_per_s"`

	// Stages are the request's TTFT breakdown (the attributor's, else the
	// client's own stages), in the stage table's order.
	Stages []event.StageTiming `json:"-"`
}

// RowOf derives r's row; s is its session's header (nil when the
// recording has none: no run id, name or offset).
func RowOf(r *event.Request, s *event.Session) RequestRow {
	row := RequestRow{
		ID: r.ID, Seq: r.Seq, Model: r.Model, Dialect: r.Dialect, Warmup: r.Warmup,
		Outcome: string(r.Outcome), RunEnded: r.RunEnded, Status: r.Status, Error: r.Error,
		Intended: r.SentAt().UTC(), SchedLag: msRound(r.SchedLag), Connect: msRound(r.ConnectRTT), Reused: r.ReusedConn,
		Prompt: r.PromptTokens, Output: r.OutputTokens, Reasoning: r.ReasoningTokens, Chunks: len(r.Chunks),
		TTFT: msRound(r.TTFT), TTFTAnswer: msRound(r.AnswerTTFT()), E2E: msRound(r.E2E), TPOT: msRound(r.TPOT()),
	}
	if s != nil {
		row.RunID, row.Session, row.Region = s.RunID, s.Name, s.Region
		if !s.Time.IsZero() && !row.Intended.IsZero() {
			row.OffsetS = round3(row.Intended.Sub(s.Time).Seconds())
		}
	}
	if r.Server != nil {
		row.Cached = r.Server.CachedTokens
	}
	flags := make([]string, len(r.Flags))
	for i, f := range r.Flags {
		flags[i] = string(f)
	}
	row.Flags = strings.Join(flags, ";")
	if rate := r.TokensPerSecond(); rate > 0 {
		row.TokPerS = round3(rate)
	}
	if gaps := r.ITLs(); len(gaps) > 0 {
		var sum time.Duration
		for _, g := range gaps {
			sum += g
		}
		slices.Sort(gaps)
		row.ITLMean = msRound(sum / time.Duration(len(gaps)))
		row.ITLP50 = msRound(gaps[(len(gaps)-1)/2])
		row.ITLMax = msRound(gaps[len(gaps)-1])
	}
	row.Stages = r.Breakdown
	if len(row.Stages) == 0 {
		row.Stages = r.Stages
	}
	return row
}

// Stage returns the row's timing of stage st, if it has one.
func (row *RequestRow) Stage(st event.Stage) (event.StageTiming, bool) {
	for _, t := range row.Stages {
		if t.Stage == st {
			return t, true
		}
	}
	return event.StageTiming{}, false
}

// msRound is d in milliseconds at microsecond resolution.
func msRound(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }
