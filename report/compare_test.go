package report

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func describe(ch Change) string {
	return fmt.Sprintf("%s %s %s %.3f -> %.3f %s (%+.1f%%)", ch.Section, ch.Name, ch.Stat, ch.Base, ch.Other, ch.Unit, ch.DeltaPct)
}

func compare(t *testing.T, base, other *Recording) *Comparison {
	t.Helper()
	c, err := Compare(base, other)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func find(t *testing.T, c *Comparison, section, name, stat string) Change {
	t.Helper()
	for _, ch := range c.Changes {
		if ch.Section == section && ch.Name == name && ch.Stat == stat {
			return ch
		}
	}
	t.Fatalf("no change %s/%s/%s", section, name, stat)
	return Change{}
}

func TestCompareSameDistributionIsNoise(t *testing.T) {
	t.Parallel()
	c := compare(t, defaultSynth(11).load(t), defaultSynth(12).load(t))
	if len(c.Changes) < 40 {
		t.Fatalf("only %d rows compared", len(c.Changes))
	}
	tested := 0
	for _, ch := range c.Changes {
		if ch.Tested() {
			tested++
		}
		if ch.Significant {
			t.Errorf("two runs of one distribution: %s called significant (p=%g)", describe(ch), ch.P)
		}
	}
	if tested < 40 {
		t.Errorf("only %d rows tested", tested)
	}
}

func TestCompareFindsAQueueShift(t *testing.T) {
	t.Parallel()
	slow := defaultSynth(14)
	slow.queueMean = 90 * time.Millisecond // +50%
	c := compare(t, defaultSynth(13).load(t), slow.load(t))
	for _, want := range [][3]string{
		{"breakdown", "queue", "mean"},
		{"latency", "ttft", "mean"},
		{"latency", "e2e", "mean"},
		{"server", "queue_depth", "mean"},
		{"server", "queue", "mean"},
	} {
		ch := find(t, c, want[0], want[1], want[2])
		if !ch.Significant {
			t.Errorf("%s: not significant (p=%g, windows %v)", describe(ch), ch.P, ch.Windows)
		}
	}
	q := find(t, c, "breakdown", "queue", "mean")
	if q.DeltaPct < 30 || q.DeltaPct > 70 {
		t.Errorf("queue mean changed %.1f%%, want about +50%%", q.DeltaPct)
	}
	for _, same := range [][3]string{{"breakdown", "prefill", "mean"}, {"latency", "itl", "p50"}, {"breakdown", "tokenize", "mean"}} {
		if ch := find(t, c, same[0], same[1], same[2]); ch.Significant {
			t.Errorf("%s: significant, but it did not change", describe(ch))
		}
	}
}

func TestCompareCutsShortRunsIntoShorterWindows(t *testing.T) {
	t.Parallel()
	short := defaultSynth(15)
	short.duration = 12 * time.Second
	c := compare(t, short.load(t), defaultSynth(16).load(t))
	if c.Window != time.Second || c.Windows[0] < 10 || c.Windows[1] < 50 {
		t.Errorf("window %s, %v windows; want 1 s windows, at least 10 in the 12 s run", c.Window, c.Windows)
	}
	if c := compare(t, defaultSynth(17).load(t), defaultSynth(18).load(t)); c.Window != 5*time.Second || c.Windows != [2]int{11, 11} {
		// Completions span 59.9 s: 5 s windows, the longest that give 10.
		t.Errorf("one-minute runs: window %s, %v windows; want 5 s and 11 each", c.Window, c.Windows)
	}
}

func TestCompareTooShortIsNotTested(t *testing.T) {
	t.Parallel()
	tiny := defaultSynth(19)
	tiny.duration = 1500 * time.Millisecond
	c := compare(t, tiny.load(t), defaultSynth(20).load(t))
	ch := find(t, c, "latency", "ttft", "mean")
	if ch.Tested() || ch.Significant || ch.Windows[0] > 1 {
		t.Errorf("a run of one window: tested %v significant %v windows %v", ch.Tested(), ch.Significant, ch.Windows)
	}
	if ch.Base <= 0 || ch.Other <= 0 {
		t.Errorf("whole-run values still shown: %v %v", ch.Base, ch.Other)
	}
}

// The file holds events in recording order; a window is only right if the
// replay files events in time order. Each window must count exactly the
// requests that completed in it.
func TestWindowsCountTheRequestsCompletedInThem(t *testing.T) {
	t.Parallel()
	s := defaultSynth(2)
	rec := s.load(t)
	ws, err := windowsOf(t.Context(), rec, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var done []time.Time
	for _, ev := range s.events() {
		if ev.Request != nil {
			done = append(done, completionOf(ev))
		}
	}
	slices.SortFunc(done, time.Time.Compare)
	if len(ws) != 5 {
		// Completions span 59.9 s from the first one: five whole windows.
		t.Fatalf("%d windows, want 5", len(ws))
	}
	first := done[0]
	for i, w := range ws {
		from, to := first.Add(time.Duration(i)*10*time.Second), first.Add(time.Duration(i+1)*10*time.Second)
		var want int64
		for _, d := range done {
			if !d.Before(from) && d.Before(to) {
				want++
			}
		}
		if w.Requests.Sent != want {
			t.Errorf("window %d [%s, %s): sent %d, want %d", i, from.Format("05.000"), to.Format("05.000"), w.Requests.Sent, want)
		}
		if !w.Server.QueueDepth.Seen || w.TTFT.Count == 0 {
			t.Errorf("window %d has no queue depth or TTFT", i)
		}
	}
}

// Two runs that differ in what they measured (another target, model and
// output length): every format says so first, naming each difference; runs
// that differ only in time, seed and length say nothing.
func TestCompareWarnsOfRunsThatDoNotCompare(t *testing.T) {
	t.Parallel()
	base, other := defaultSynth(21).load(t), defaultSynth(22).load(t)
	same := compare(t, base, other)
	if len(same.Mismatches) != 0 || same.MismatchWarning() != "" {
		t.Fatalf("runs of one workload: mismatches %v", same.Mismatches)
	}
	h := *other.Summary.Session
	h.Target, h.Model = "http://elsewhere:8000", "another-model"
	h.Load.OutputTokens = "64"
	other.Summary.Session = &h
	c := compare(t, base, other)
	var fields []string
	for _, m := range c.Mismatches {
		fields = append(fields, m.Field)
	}
	if want := []string{"target", "model", "output tokens"}; !slices.Equal(fields, want) {
		t.Fatalf("mismatches %v, want %v", fields, want)
	}
	for _, f := range []Format{Markdown, CSV, HTML, JSON} {
		var b strings.Builder
		if err := WriteComparison(&b, f, c); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		first := strings.Index(out, "may not compare")
		if f == CSV { // a row per difference, before the statistics
			first = strings.Index(out, "\nmismatch,target,")
		}
		if first < 0 || !strings.Contains(out, "another-model") || !strings.Contains(out, "http://elsewhere:8000") {
			t.Errorf("%s does not warn of the differences:\n%.600s", f, out)
			continue
		}
		// First: before any statistic's row.
		if i := strings.Index(out, "ttft"); i >= 0 && i < first {
			t.Errorf("%s warns only after the statistics (warning at %d, ttft at %d)", f, first, i)
		}
	}
}
