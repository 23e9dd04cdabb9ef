package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

func TestSimulatedOnlyWhenSimulated(t *testing.T) {
	cases := []struct {
		name           string
		o              synthOpts
		header, gpuBox bool
	}{
		{"real", synthOpts{}, false, false},
		{"simulated server", synthOpts{simulated: true}, true, false},
		{"simulated GPU", synthOpts{gpuSim: true}, true, true},
		{"both", synthOpts{simulated: true, gpuSim: true}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _, _ := session(t, c.o, Options{}, 5, 160, 48)
			lines := strings.Split(ansi.Strip(m.View()), "\n")
			if got := strings.Contains(lines[0], "SIMULATED"); got != c.header {
				t.Errorf("header SIMULATED = %v, want %v: %q", got, c.header, lines[0])
			}
			gpuTitle := ""
			for _, l := range lines {
				if strings.HasPrefix(l, "─ GPU") {
					gpuTitle = l
				}
			}
			if got := strings.Contains(gpuTitle, "SIMULATED"); got != c.gpuBox {
				t.Errorf("GPU panel SIMULATED = %v, want %v: %q", got, c.gpuBox, gpuTitle)
			}
			n := strings.Count(strings.Join(lines, "\n"), "SIMULATED")
			want := 0
			if c.header {
				want++
			}
			if c.gpuBox {
				want += 2 // the GPU panel and the header's nvml state
			}
			if n != want {
				t.Errorf("SIMULATED appears %d times, want %d", n, want)
			}
		})
	}
}

func TestNoColorShowsSegmentLetters(t *testing.T) {
	s := newSynth(synthOpts{})
	s.advance(20)
	for _, noColor := range []bool{true, false} {
		m := newModel(StaticFeed(s.frame()), Options{NoColor: noColor}, colorRenderer())
		m.Update(sizeMsg(120, 40))
		m.Update(tickMsg{})
		v := m.View()
		letters := strings.Contains(v, "qqqqq") && strings.Contains(v, "ppppp")
		escapes := strings.Contains(v, "\x1b[")
		if noColor && (!letters || escapes) {
			t.Errorf("NoColor: letters %v, escape codes %v; want letters and no colour", letters, escapes)
		}
		if !noColor && (letters || !escapes || !strings.Contains(v, "█")) {
			t.Errorf("colour: letters %v, escape codes %v; want coloured blocks", letters, escapes)
		}
	}
}

// Every size lays out to exactly its lines and cells; the header and the
// bar always stay.
func TestLayoutFitsEverySize(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {100, 30}, {120, 40}, {200, 50}, {300, 80}, {60, 16}, {80, 12}} {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			m, _, _ := session(t, synthOpts{}, Options{Objectives: testSLO}, 40, w, h)
			for _, keys := range [][]string{nil, {"tab"}, {"enter"}, {"esc", "esc", "?"}} {
				press(m, keys...)
				lines := strings.Split(m.View(), "\n")
				if len(lines) != h {
					t.Fatalf("%v: %d lines, want %d", keys, len(lines), h)
				}
				for i, l := range lines {
					if got := ansi.StringWidth(l); got != w {
						t.Fatalf("%v: line %d is %d cells, want %d: %q", keys, i, got, w, l)
					}
				}
			}
			press(m, "?")
			v := m.View()
			if !strings.Contains(v, "latscope") || !strings.Contains(v, "TTFT breakdown") || !strings.Contains(v, "▕") {
				t.Errorf("header or bar missing at %dx%d:\n%s", w, h, v)
			}
		})
	}
}

func TestFoldOrder(t *testing.T) {
	l := layoutMain(200, 50, 3, 7, 15, 2)
	if l.charts == 0 || !l.gpuHistories {
		t.Fatalf("200x50 folded something: %+v", l)
	}
	l = layoutMain(105, 50, 3, 7, 15, 2)
	if l.charts != 0 || !l.gpuHistories {
		t.Fatalf("105 wide: charts should go first, GPU histories stay: %+v", l)
	}
	l = layoutMain(80, 40, 3, 7, 15, 2)
	if l.gpuHistories {
		t.Fatalf("80x40: GPU histories go next: %+v", l)
	}
	if got := []int{legendRowsFor(24), legendRowsFor(40), legendRowsFor(50)}; got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("legend rows at 24, 40, 50 lines: %v, want 1, 2, 3", got)
	}
}

// A legend that does not fit shortens its entries, then leaves out the
// smallest with "+N more": every entry it shows is whole.
func TestLegendFoldsWithoutCuttingWords(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	segs := []segment{
		{stage: event.StageTokenize, value: 9.02}, {stage: event.StageQueue, value: 68.8}, {stage: event.StagePrefill, value: 95.3},
		{stage: event.StageFirstDecode, value: 6.04}, {stage: event.StageNetworkReturn, value: 0.5, est: true},
		{stage: event.StageUnattributed, value: 1.5, est: true},
	}
	sum := 0.0
	for _, s := range segs {
		sum += s.value
	}
	for _, w := range []int{40, 60, 80, 120, 200} {
		for rows := 1; rows <= 3; rows++ {
			lines, _ := legend(st, segs, sum, rows, "", w)
			if len(lines) != rows {
				t.Fatalf("%d cells, %d rows: %d lines", w, rows, len(lines))
			}
			text := strings.Join(lines, "\n")
			if strings.Contains(text, "…") {
				t.Errorf("%d cells, %d rows: a cut entry: %q", w, rows, text)
			}
			for _, l := range lines {
				if visibleWidth(l) > w {
					t.Errorf("%d cells: line %q is too wide", w, l)
				}
			}
			shown := strings.Count(text, "%")
			if more := strings.Contains(text, "more"); more == (shown == len(segs)) {
				t.Errorf("%d cells, %d rows: %d of %d shown, +N more %v: %q", w, rows, shown, len(segs), more, text)
			}
			if !strings.Contains(text, "prefill") && !strings.Contains(text, "pref") {
				t.Errorf("%d cells, %d rows: the largest stage left out: %q", w, rows, text)
			}
		}
	}
}

func TestSLOLimitBreachAndMarker(t *testing.T) {
	slo := []aggregate.Objective{{Metric: "ttft.p99", Op: "<", Value: 100, Text: "100ms"}}
	// Given on the command line, or only in a replayed session's header:
	// the screen draws the objectives the aggregator judges either way.
	for name, opts := range map[string]Options{"given": {Objectives: slo}, "from the session": {}} {
		t.Run(name, func(t *testing.T) {
			m, _, _ := session(t, synthOpts{slo: slo[0].String()}, opts, 25, 200, 50)
			v := ansi.Strip(m.View())
			if !strings.Contains(v, "SLO 100") {
				t.Error("the TTFT chart does not draw the SLO limit")
			}
			var ttftRow string
			for _, l := range strings.Split(v, "\n") {
				if strings.HasPrefix(l, " ttft ") {
					ttftRow = l
				}
			}
			if !strings.Contains(ttftRow, "!") {
				t.Errorf("the broken ttft p99 is not marked: %q", ttftRow)
			}
			if !strings.Contains(v, "SLO ttft.p99<100ms broken for a whole 10 s window") {
				t.Errorf("no SLO breach marker:\n%s", v)
			}
			if n := strings.Count(v, "broken for a whole"); n != 1 {
				t.Errorf("%d breach markers for one lasting breach, want 1", n)
			}
		})
	}
}

func TestProbeLimitWarning(t *testing.T) {
	s := newSynth(synthOpts{})
	s.advance(5)
	s.add(event.NewProbe(&event.ProbeSample{Time: t0.Add(5 * time.Second), InFlight: 16, CPUPercent: 97, SchedLagP99: 14 * time.Millisecond, LagSamples: 40,
		Limited: true, Reason: "open loop fell behind"}))
	m := newModel(StaticFeed(s.frame()), Options{}, plainRenderer())
	m.Update(sizeMsg(120, 40))
	m.Update(tickMsg{})
	if v := m.View(); !strings.Contains(v, "LATSCOPE IS THE LIMIT: it reported itself the limit 1 time (latest: open loop fell behind)") {
		t.Fatalf("no probe-limit warning:\n%s", v)
	}
}

func TestSourceTroubleShows(t *testing.T) {
	s := newSynth(synthOpts{noGPU: true})
	s.advance(5)
	at := t0.Add(5 * time.Second)
	s.add(event.NewServer(&event.ServerSample{Time: at, Source: "http://gpu-7:8000/metrics", Stale: true, Error: "connection refused"}))
	s.add(event.NewMarker(&event.Marker{Time: at, Kind: event.MarkerCollector, Source: "collector.otlp", Message: "otlp receiver refused 3 export(s)"}))
	s.add(event.NewGPU(&event.GPUSample{Time: at, Available: false, Reason: "NVML unavailable: built without cgo"}))
	fr := s.frame()
	fr.Status = []string{"agent eu-1: reconnecting (attempt 3)"}
	m := newModel(StaticFeed(fr), Options{}, plainRenderer())
	m.Update(sizeMsg(160, 48))
	m.Update(tickMsg{})
	v := m.View()
	for _, want := range []string{"scrape ✗", "⚠ metrics scrape failing: connection refused", "otlp ✗", "+1 more (? lists all)", "nvml ✗", "NVML unavailable: built without cgo"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q", want)
		}
	}
	// The help page lists every warning the status line had no room for.
	press(m, "?")
	v = m.View()
	for _, want := range []string{"⚠ metrics scrape failing: connection refused", "⚠ OTLP join: otlp receiver refused 3 export(s)", "⚠ agent eu-1: reconnecting (attempt 3)"} {
		if !strings.Contains(v, want) {
			t.Errorf("help page lacks %q", want)
		}
	}
}

func TestFailedRequestWaterfall(t *testing.T) {
	r := &event.Request{ID: "bad-1", Intended: t0, Start: t0, E2E: 900 * time.Millisecond, Outcome: event.OutcomeHTTPStatus, Status: 503, Error: "overloaded"}
	st := newStyles(plainRenderer(), true)
	v := strings.Join(renderWaterfall(st, r, nil, 120, 30), "\n")
	if !strings.Contains(v, "failed: http_status HTTP 503 (overloaded)") {
		t.Fatalf("failed request does not show its outcome and error:\n%s", v)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	h := newHistory()
	s := aggregate.Snapshot{}
	for i := range 100_000 {
		s.Now = t0.Add(time.Duration(i) * time.Second)
		h.add(&s)
	}
	if len(h.run) > runPoints || h.n != recentPoints {
		t.Fatalf("history holds %d run points and %d recent, want at most %d and %d", len(h.run), h.n, runPoints, recentPoints)
	}
	var n int
	h.points(aggregate.Win5m, func(point) { n++ })
	if n != 300 {
		t.Errorf("5 min window has %d points, want 300", n)
	}
	s.Now = t0 // a replay seeking back starts over
	h.add(&s)
	if h.n != 1 || len(h.run) != 1 {
		t.Errorf("seeking back kept %d points", h.n)
	}
}

func TestRunQuitsOnQAndRestores(t *testing.T) {
	var out strings.Builder
	s := newSynth(synthOpts{})
	s.advance(3)
	err := Run(context.Background(), StaticFeed(s.frame()), Options{Input: strings.NewReader("q"), Output: &out})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(out.String(), "\x1b[?1049h") || !strings.Contains(out.String(), "\x1b[?1049l") {
		t.Error("Run did not enter and leave the alternate screen")
	}
}

func TestRunEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pr, pw := ioPipe()
	defer pw.Close()
	if err := Run(ctx, StaticFeed{}, Options{Input: pr, Output: &strings.Builder{}}); err != nil {
		t.Fatalf("Run after ctx ended: %v", err)
	}
}

// A chart's title names the window each point summarises and the span it
// draws: over the whole run its points are still the 10 s percentiles.
func TestChartTitlesNameTheirWindow(t *testing.T) {
	for w, want := range map[aggregate.Window]string{
		aggregate.WinRun: "(10s window, whole run)", aggregate.Win1m: "(10s window, last 1m)",
	} {
		m, _, _ := session(t, synthOpts{}, Options{Window: w}, 30, 200, 50)
		v := ansi.Strip(m.View())
		var title string
		for _, l := range strings.Split(v, "\n") {
			if i := strings.Index(l, "TTFT ms  "); i >= 0 {
				title = l[i:]
			}
		}
		if !strings.Contains(title, want) {
			t.Errorf("%s: TTFT chart title %q lacks %q", w, title, want)
		}
		if strings.Contains(title, "(run)") {
			t.Errorf("%s: title %q claims the run without naming its points' window", w, title)
		}
	}
}
