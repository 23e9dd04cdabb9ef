package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/report"
)

// randomSession is a random stream of requests: some failed, some without
// a breakdown, the rest with a breakdown of random stages whose signed
// residual (unattributed, negative when the sources overcount) makes them
// add up to the TTFT, as the attributor's do.
func randomSession(seed uint64) (*event.Session, []event.Event) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
	header := &event.Session{Time: start, Latscope: "test", Name: "random", Target: "http://10.0.0.1:8000",
		Server: "vllm", Dialect: "openai-chat", Model: "m", Load: event.Load{Mode: "closed", Concurrency: 4}}
	stages := []event.Stage{event.StageNetworkOut, event.StageTokenize, event.StageQueue, event.StagePrefill, event.StageFirstDecode}
	n := 20 + rng.IntN(300)
	// Sources that overcount (stages past the TTFT, a negative residual)
	// in one session of three.
	over := int64(2 + rng.IntN(3)/2)
	var evs []event.Event
	for i := range n {
		at := start.Add(time.Duration(i) * time.Duration(5+rng.IntN(200)) * time.Millisecond)
		ttft := time.Duration(5_000_000 + rng.Int64N(500_000_000)) // 5–505 ms, in ns
		r := &event.Request{ID: fmt.Sprintf("r%d", i), Dialect: "openai-chat", Intended: at, Start: at,
			Outcome: event.OutcomeOK, TTFT: ttft, E2E: ttft + 10*time.Millisecond, OutputTokens: 2,
			Chunks: []event.Chunk{{At: ttft, Tokens: 1}, {At: ttft + 10*time.Millisecond, Tokens: 1}}}
		switch k := rng.IntN(20); {
		case k == 0:
			r.Outcome, r.Status, r.Error, r.Chunks, r.TTFT = event.OutcomeHTTPStatus, 503, "busy", nil, 0
		case k == 1:
			// No server data: no breakdown.
		default:
			var sum time.Duration
			for _, st := range stages {
				if rng.IntN(4) == 0 {
					continue
				}
				d := time.Duration(rng.Int64N(int64(ttft) * over / 4))
				sum += d
				prov := event.ServerReported
				if st == event.StageNetworkOut {
					prov = event.Estimated
				}
				r.Breakdown = append(r.Breakdown, event.StageTiming{Stage: st, Duration: d, Provenance: prov})
			}
			r.Breakdown = append(r.Breakdown, event.StageTiming{Stage: event.StageUnattributed, Duration: ttft - sum, Provenance: event.Estimated})
		}
		evs = append(evs, event.NewRequest(r))
	}
	return header, evs
}

// Every surface gives each stage's share of TTFT in the same window and
// statistic (the whole run's mean: a stage's total over the TTFT total),
// and agrees with the others at its printed precision: the summary JSON,
// the Markdown report, the dashboard's bar legend and the headless table.
func TestStageSharesAgreeOnEverySurface(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	check := func(seed uint64) bool {
		header, evs := randomSession(seed)
		agg := aggregate.New(aggregate.Config{})
		agg.Add(event.NewSession(header))
		for _, ev := range evs {
			agg.Add(ev)
		}
		final := agg.Final()
		summary := final.Summary()

		surfaces := map[string]map[event.Stage]float64{ // percent of TTFT
			"summary JSON":    jsonShares(t, summary),
			"headless table":  tableShares(t, summary),
			"Markdown report": markdownShares(t, filepath.Join(dir, fmt.Sprintf("run-%d.zst", seed)), header, evs),
			"dashboard":       dashboardShares(t, final),
		}
		// Printed precision: the JSON's full, the others' 0.1 point; two
		// figures printed to 0.1 agree within one step of it.
		const step = 0.1 + 1e-9
		ok := true
		ref := surfaces["summary JSON"]
		if len(ref) == 0 {
			t.Errorf("seed %d: no breakdown in the summary", seed)
			return false
		}
		for name, got := range surfaces {
			for st, want := range ref {
				v, found := got[st]
				if !found || math.Abs(v-want) > step {
					t.Errorf("seed %d: %s gives %s %.3f%% (found %t), the summary JSON %.3f%%", seed, name, st, v, found, want)
					ok = false
				}
			}
			if len(got) != len(ref) {
				t.Errorf("seed %d: %s lists %d stages, the summary JSON %d: %v vs %v", seed, name, len(got), len(ref), got, ref)
				ok = false
			}
		}
		return ok
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 12, Rand: mrand.New(mrand.NewSource(16))}); err != nil {
		t.Fatal(err)
	}
}

func jsonShares(t *testing.T, s aggregate.Summary) map[event.Stage]float64 {
	t.Helper()
	var buf bytes.Buffer
	if err := aggregate.WriteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Breakdown struct {
			Stages map[event.Stage]struct {
				Share float64 `json:"share"`
			} `json:"stages"`
		} `json:"breakdown"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	out := make(map[event.Stage]float64)
	for st, x := range doc.Breakdown.Stages {
		out[st] = 100 * x.Share
	}
	return out
}

// tableShares reads the share column of the headless table's TTFT
// breakdown (what `latscope run --no-tui` prints).
func tableShares(t *testing.T, s aggregate.Summary) map[event.Stage]float64 {
	t.Helper()
	var buf bytes.Buffer
	if err := aggregate.WriteTable(&buf, s); err != nil {
		t.Fatal(err)
	}
	out := make(map[event.Stage]float64)
	in := false
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "TTFT breakdown"):
			in = true
		case !in || len(f) == 0 || f[0] == "stage":
		case f[0] == "unattributed:" || !strings.HasPrefix(line, "  "):
			in = false
		case len(f) >= 7:
			out[event.Stage(f[0])] = percent(t, f[6])
		}
	}
	return out
}

// markdownShares records the stream, loads it as `latscope report` does
// and reads the share column of its TTFT breakdown table.
func markdownShares(t *testing.T, path string, header *event.Session, evs []event.Event) map[event.Stage]float64 {
	t.Helper()
	w, err := recorder.Create(path, header, recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := report.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, report.Markdown, rec); err != nil {
		t.Fatal(err)
	}
	out := make(map[event.Stage]float64)
	share := -1
	for _, line := range strings.Split(buf.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			share = -1
			if strings.HasPrefix(line, "## TTFT breakdown") {
				share = 0
			}
		case share >= 0 && strings.HasPrefix(line, "| stage |"):
			for i, c := range cells(line) {
				if c == "share" {
					share = i
				}
			}
		case share > 0 && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "|---"):
			c := cells(line)
			if share < len(c) && strings.HasSuffix(c[share], "%") {
				out[event.Stage(c[0])] = percent(t, c[share])
			}
		}
	}
	return out
}

func cells(line string) []string {
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

var legendShare = regexp.MustCompile(`(?:^|\s)\S ([a-z_]+)(?:~\??)? \S+ (-?[0-9.]+)%`)

// dashboardShares shows the snapshot on the dashboard, on the whole run
// and its mean, and reads the bar's legend.
func dashboardShares(t *testing.T, s aggregate.Snapshot) map[event.Stage]float64 {
	t.Helper()
	feed := &stepFeed{}
	feed.set(Frame{Snapshot: s})
	m := newModel(feed, Options{Window: aggregate.WinRun, Stat: aggregate.BandMean}, plainRenderer())
	m.Update(sizeMsg(200, 60))
	m.Update(tickMsg{})
	bd := breakdownOf(&m.frame.Snapshot, m.window, m.stat)
	text := ansi.Strip(strings.Join(first(legend(newStyles(plainRenderer(), true), bd.segs, bd.total, 3, "", 400)), "\n"))
	out := make(map[event.Stage]float64)
	for _, g := range legendShare.FindAllStringSubmatch(text, -1) {
		out[event.Stage(g[1])] = percent(t, g[2]+"%")
	}
	return out
}

func percent(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		t.Fatalf("share %q: %v", s, err)
	}
	return v
}
