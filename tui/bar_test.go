package tui

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

func TestSplitIsExactAndProportional(t *testing.T) {
	segs := []segment{{value: 2.1}, {value: 0.9}, {value: 11}, {value: 702}, {value: 118}, {value: 6.2}, {value: -0.3}}
	for _, width := range []int{1, 7, 40, 76, 196} {
		var total float64
		for _, s := range segs {
			total += max(s.value, 0)
		}
		filled, cells := split(width, total, total, segs)
		sum := 0
		for i, n := range cells {
			sum += n
			exact := float64(width) * max(segs[i].value, 0) / total
			if math.Abs(float64(n)-exact) >= 1 {
				t.Errorf("width %d: segment %d has %d cells, exact %.2f", width, i, n, exact)
			}
		}
		if filled != width || sum != filled {
			t.Errorf("width %d: filled %d, cells add to %d", width, filled, sum)
		}
	}
	filled, _ := split(100, 50, 200, segs) // a quarter of the scale
	if filled != 25 {
		t.Errorf("half-scale bar filled %d of 100, want 25", filled)
	}
}

func TestSharesAddTo100(t *testing.T) {
	got := shares([]segment{{value: 1}, {value: 1}, {value: 1}}, 3)
	if got[0]+got[1]+got[2] != 1000 {
		t.Fatalf("shares %v do not add to 100.0%%", got)
	}
}

var legendItem = regexp.MustCompile(`(?:^|\s)(\S) ([a-z_]+)~? (-?[0-9.]+s?) [0-9.]+%`)

// The bar's segments and the legend's numbers add up to the TTFT its title
// claims, for the mean and for the p99 band.
func TestBarAddsUpToItsTitle(t *testing.T) {
	const width = 160
	for _, stat := range []aggregate.BandStat{aggregate.BandMean, aggregate.BandP99} {
		t.Run(stat.String(), func(t *testing.T) {
			m, _, _ := session(t, synthOpts{}, Options{Window: aggregate.WinRun, Stat: stat}, 120, width, 48)
			lines := strings.Split(ansi.Strip(m.View()), "\n")
			band := m.frame.Snapshot.Windows[aggregate.WinRun].Bands[stat]
			var title, bar string
			var legend []string
			for i, l := range lines {
				if strings.HasPrefix(l, "─ TTFT breakdown") {
					title, bar = l, lines[i+1]
					for _, x := range lines[i+2:] {
						if strings.HasPrefix(x, "─") {
							break
						}
						legend = append(legend, x)
					}
					break
				}
			}
			if title == "" {
				t.Fatal("no breakdown on screen")
			}
			if stat == aggregate.BandP99 && !strings.Contains(title, "p99 band: slowest 1%") {
				t.Errorf("p99 title %q does not say it is the slowest 1%% band", title)
			}
			claimed := parseMS(t, regexp.MustCompile(`· ([0-9.]+ m?s)\s*─*$`).FindStringSubmatch(title)[1])
			if math.Abs(claimed-band.TTFT) > 0.5+band.TTFT*0.005 {
				t.Errorf("title claims %.2f ms, band TTFT is %.2f", claimed, band.TTFT)
			}

			// Cells: the bar is drawn to its own scale, so it fills the
			// width, and each stage's cells are its share within a cell.
			inner := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(bar), "▕"), "▏")
			barW := width - 4
			if got := len([]rune(strings.TrimRight(inner, " "))); got != barW {
				t.Errorf("bar fills %d cells, want %d", got, barW)
			}
			var pos float64
			for _, v := range band.Stages {
				pos += max(v, 0)
			}
			for st, v := range band.Stages {
				n := strings.Count(inner, string(infoOf(st).letter))
				exact := float64(barW) * max(v, 0) / pos
				if math.Abs(float64(n)-exact) >= 1 {
					t.Errorf("%s: %d cells, exact share %.2f", st, n, exact)
				}
			}

			// Legend: every stage listed, and the numbers add up to the title.
			var sum float64
			items := 0
			for _, l := range legend {
				for _, mm := range legendItem.FindAllStringSubmatch(l, -1) {
					v, err := strconv.ParseFloat(mm[3], 64)
					if err != nil {
						t.Fatalf("legend number %q: %v", mm[3], err)
					}
					sum += v
					items++
				}
			}
			if items != len(band.Stages) {
				t.Errorf("legend lists %d stages, band has %d", items, len(band.Stages))
			}
			// Each number is rounded to 3 digits: allow half a unit of the
			// last digit per item.
			if math.Abs(sum-claimed) > 0.05*float64(items)+0.5 {
				t.Errorf("legend adds up to %.2f ms, title claims %.2f", sum, claimed)
			}
		})
	}
}

func parseMS(t *testing.T, s string) float64 {
	t.Helper()
	v, unit, _ := strings.Cut(s, " ")
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	if unit == "s" {
		f *= 1000
	}
	return f
}

func TestEstimatedStagesAreMarked(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{}, 20, 160, 48)
	v := m.View()
	for _, want := range []string{"network_out~", "network_return~", "~ estimated"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q", want)
		}
	}
	if strings.Contains(v, "queue~") || strings.Contains(v, "prefill~") {
		t.Error("a server-reported stage is marked estimated")
	}
}

func TestSourcesShareOneScale(t *testing.T) {
	fast := newSynth(synthOpts{name: "eu-1"})
	slow := newSynth(synthOpts{name: "us-2"})
	fast.advance(20)
	slow.load = func(int) float64 { return 1 }
	slow.advance(20)
	total := newSynth(synthOpts{})
	total.advance(20)
	fr := total.frame()
	fr.Sources = []aggregate.Snapshot{fast.frame().Snapshot, slow.frame().Snapshot}
	m := newModel(StaticFeed(fr), Options{}, plainRenderer())
	m.Update(sizeMsg(160, 48))
	m.Update(tickMsg{})
	v := ansi.Strip(m.View())
	var eu, us string
	for _, l := range strings.Split(v, "\n") {
		switch {
		case strings.HasPrefix(l, " eu-1"):
			eu = l
		case strings.HasPrefix(l, " us-2"):
			us = l
		}
	}
	if eu == "" || us == "" {
		t.Fatalf("no per-source bars:\n%s", v)
	}
	filled := func(l string) int {
		in := l[strings.Index(l, "▕")+len("▕") : strings.Index(l, "▏")]
		return len([]rune(strings.TrimRight(in, " ")))
	}
	if filled(eu) >= filled(us) {
		t.Errorf("the faster source's bar (%d cells) is not shorter than the slower's (%d)", filled(eu), filled(us))
	}
	_ = event.StageQueue
}
