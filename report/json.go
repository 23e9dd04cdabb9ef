package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// extra is what the report adds to aggregate.WriteJSON's object, under the
// one key "report".
type extra struct {
	File     string              `json:"file"`
	Events   int64               `json:"events"`
	Partial  bool                `json:"partial"`          // cut short: see warnings
	CutAt    *int64              `json:"cut_at,omitempty"` // where, in bytes`
	Warnings []string            `json:"warnings"`
	Series   Series              `json:"series"`
	Bands    map[string]bandJSON `json:"bands"`
	// Sweep is a sweep recording's answer and steps, as `latscope sweep
	// --json` prints them.
	Sweep *sweepJSON `json:"sweep,omitempty"`
}

// bandJSON is one TTFT breakdown band: its stages add up to its TTFT.
type bandJSON struct {
	FromPct   float64                 `json:"from_pct"`
	ToPct     float64                 `json:"to_pct"`
	Requests  int64                   `json:"requests"`
	MinTTFTMS float64                 `json:"min_ttft_ms"`
	MaxTTFTMS float64                 `json:"max_ttft_ms"`
	TTFTMS    float64                 `json:"ttft_ms"`
	StagesMS  map[event.Stage]float64 `json:"stages_ms"`
}

func extraOf(rec *Recording) extra {
	x := extra{File: rec.Path, Events: rec.Events, Partial: rec.Partial, Warnings: rec.Warnings, Series: rec.Series, Bands: map[string]bandJSON{},
		Sweep: sweepJSONOf(rec.Sweep)}
	if rec.Partial {
		x.CutAt = &rec.CutAt
	}
	if x.Warnings == nil {
		x.Warnings = []string{}
	}
	for _, b := range rec.Bands {
		stages := make(map[event.Stage]float64, len(b.Stages))
		for k, v := range b.Stages {
			stages[k] = rounded(v)
		}
		x.Bands[b.Stat.String()] = bandJSON{FromPct: b.FromPct, ToPct: b.ToPct, Requests: b.Requests,
			MinTTFTMS: rounded(b.MinTTFT), MaxTTFTMS: rounded(b.MaxTTFT), TTFTMS: rounded(b.TTFT), StagesMS: stages}
	}
	return x
}

// recordingJSON is aggregate.WriteJSON's object for rec with the "report"
// key added last. The summary's bytes are kept as WriteJSON wrote them, so
// a reader of `latscope run --json` reads this too.
func recordingJSON(rec *Recording) ([]byte, error) {
	var buf bytes.Buffer
	if err := aggregate.WriteJSON(&buf, rec.Summary); err != nil {
		return nil, err
	}
	obj := bytes.TrimRight(buf.Bytes(), "\n")
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("the summary is not a JSON object")
	}
	x, err := json.MarshalIndent(extraOf(rec), "  ", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the report's series: %w", err)
	}
	out := append([]byte{}, bytes.TrimRight(obj[:len(obj)-1], "\n")...)
	out = append(out, ",\n  \"report\": "...)
	out = append(out, x...)
	return append(out, "\n}"...), nil
}

func writeJSON(w io.Writer, rec *Recording) error {
	b, err := recordingJSON(rec)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// changeJSON is a Change with unknown values as null.
type changeJSON struct {
	Section     string   `json:"section"`
	Name        string   `json:"name"`
	Stat        string   `json:"stat"`
	Unit        string   `json:"unit"`
	Base        *float64 `json:"base"`
	Other       *float64 `json:"other"`
	Change      *float64 `json:"change"`
	ChangePct   *float64 `json:"change_pct"`
	P           *float64 `json:"p"`
	Tested      bool     `json:"tested"`
	Untested    string   `json:"untested,omitempty"` // why not tested
	Significant bool     `json:"significant"`
	Windows     [2]int   `json:"windows"`
}

func writeJSONComparison(w io.Writer, c *Comparison) error {
	base, err := recordingJSON(c.Base)
	if err != nil {
		return err
	}
	other, err := recordingJSON(c.Other)
	if err != nil {
		return err
	}
	changes := make([]changeJSON, len(c.Changes))
	for i, ch := range c.Changes {
		var p *float64 // kept to full precision: p-values are often tiny
		if ch.Tested() {
			p = &ch.P
		}
		changes[i] = changeJSON{Section: ch.Section, Name: ch.Name, Stat: ch.Stat, Unit: ch.Unit,
			Base: known(ch.Base), Other: known(ch.Other), Change: known(ch.Delta), ChangePct: known(ch.DeltaPct),
			P: p, Tested: ch.Tested(), Untested: ch.Untested(), Significant: ch.Significant, Windows: ch.Windows}
	}
	mismatches := c.Mismatches
	if mismatches == nil {
		mismatches = []Mismatch{}
	}
	b, err := json.MarshalIndent(struct {
		Warning    string          `json:"warning,omitempty"` // first: how the runs differ in what they measured
		Base       json.RawMessage `json:"base"`
		Other      json.RawMessage `json:"other"`
		Comparison any             `json:"comparison"`
	}{c.MismatchWarning(), base, other, struct {
		Mismatches []Mismatch   `json:"mismatches"`
		Rule       string       `json:"rule"`
		Alpha      float64      `json:"alpha"`
		WindowS    float64      `json:"window_s"`
		Windows    [2]int       `json:"windows"`
		Changes    []changeJSON `json:"changes"`
	}{mismatches, Rule, Alpha, c.Window.Seconds(), c.Windows, changes}}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the comparison: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
