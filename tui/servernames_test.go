package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// A stage the server named itself is "server: NAME" in the legend and the
// table, never the key's "st:" it once had, and every letter the bars draw
// without colour has its entry in the letter key.
func TestServerStagesNamedAndEveryLetterKeyed(t *testing.T) {
	m, _, _ := session(t, synthOpts{serverStages: true}, Options{NoColor: true}, 20, 200, 50)
	v := ansi.Strip(m.View())
	for _, want := range []string{"server: loop_wait", "server: other"} {
		if n := strings.Count(v, want); n < 2 {
			t.Errorf("%q %d times on the dashboard, want it in the legend and the table:\n%s", want, n, v)
		}
	}
	if strings.Contains(v, "st:") {
		t.Errorf("st: on the dashboard:\n%s", v)
	}
	key := letterKey()
	for _, l := range strings.Split(v, "\n") {
		from, to := strings.Index(l, "▕"), strings.LastIndex(l, "▏")
		if from < 0 || to <= from {
			continue
		}
		for _, c := range l[from+len("▕") : to] {
			if c != ' ' && c != '░' && !strings.Contains(key, string(c)+" ") {
				t.Errorf("letter %q drawn in %q has no entry in the key %q", c, l, key)
			}
		}
	}
	for _, want := range []string{"S server: NAME", "o other", "# TTFT", "- decode", "T thinking"} {
		if !strings.Contains(key, want) {
			t.Errorf("letter key %q lacks %q", key, want)
		}
	}
}

// A band whose stages overflow the named ones draws "other" with its
// letter, o, which the key defines.
func TestOtherHasItsLetter(t *testing.T) {
	var s aggregate.Snapshot
	stages := map[event.Stage]float64{event.StageQueue: 3, event.StageOther: 5, event.ServerTimingPrefix + "loop_wait": 4}
	s.Windows[aggregate.WinRun].Bands[aggregate.BandMean] = aggregate.Band{Requests: 1, TTFT: 12, Stages: stages}
	bd := breakdownOf(&s, aggregate.WinRun, aggregate.BandMean)
	var letters []byte
	for _, seg := range bd.segs {
		letters = append(letters, infoOf(seg.stage).letter)
	}
	if string(letters) != "qSo" {
		t.Errorf("letters %q, want q, S (the server's own), o (other)", letters)
	}
}
