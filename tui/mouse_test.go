package tui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/latscope/latscope/event"
)

func wheel(down bool) tea.MouseMsg {
	b := tea.MouseButtonWheelUp
	if down {
		b = tea.MouseButtonWheelDown
	}
	return tea.MouseMsg{Button: b, Action: tea.MouseActionPress}
}

func leftClick(x, y int) tea.MouseMsg {
	return tea.MouseMsg{X: x, Y: y, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress}
}

// startProgram runs the dashboard headless on a 60 s synthetic session and
// waits for the first frame.
func startProgram(t *testing.T) *teatest.TestModel {
	t.Helper()
	s := newSynth(synthOpts{})
	s.advance(60)
	m := newModel(StaticFeed(s.frame()), Options{}, plainRenderer())
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("TTFT breakdown")) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
	return tm
}

func finalModel(t *testing.T, tm *teatest.TestModel) *model {
	t.Helper()
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*model)
}

// The wheel scrolls the requests, a click selects one, and a second click
// on it opens its waterfall.
func TestMouseSelectsAndOpensARequest(t *testing.T) {
	tm := startProgram(t)
	tm.Send(keyMsg("tab"))
	tm.Send(wheel(true)) // the selection moves three rows down
	tm.Send(wheel(true))
	tm.Send(wheel(false))
	// The list's rows start under the header (3 lines), the title, the
	// filter line, the section's label and the column header.
	const firstRow = headerLines + 4
	tm.Send(leftClick(10, firstRow+1)) // selects the second row
	tm.Send(leftClick(10, firstRow+1)) // and opens it
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	m := finalModel(t, tm)
	if m.screen != screenWaterfall || m.open == nil {
		t.Fatalf("the second click did not open the request: screen %d", m.screen)
	}
	if want := m.list.rows[1].ID; m.open.ID != want {
		t.Fatalf("opened %s, want the clicked row's %s", m.open.ID, want)
	}
	if !strings.Contains(ansi.Strip(m.View()), "request "+m.open.ID) {
		t.Fatalf("the waterfall does not show %s", m.open.ID)
	}
}

// The wheel moves the selection by a few rows at a time, within the list.
func TestWheelScrollsTheRequests(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{}, 60, 120, 40)
	press(m, "tab")
	m.Update(wheel(true))
	m.Update(wheel(true))
	if m.sel != 2*wheelStep {
		t.Fatalf("two notches down: row %d, want %d", m.sel, 2*wheelStep)
	}
	for range 100 {
		m.Update(wheel(true))
	}
	if m.sel != len(m.list.rows)-1 {
		t.Fatalf("scrolled past the end: row %d of %d", m.sel, len(m.list.rows))
	}
	v := ansi.Strip(m.View())
	if !strings.Contains(v, "▸ "+m.list.rows[m.sel].ID) || !strings.Contains(v, "of 40") {
		t.Fatalf("the last row is not in view with its position:\n%s", v)
	}
	m.Update(wheel(false))
	if m.sel != len(m.list.rows)-1-wheelStep {
		t.Fatalf("a notch up: row %d", m.sel)
	}
}

// `/` filters the requests view: only failed requests, then only those
// with a TTFT of at least 300 ms; esc clears the filter.
func TestSlashFiltersTheRequests(t *testing.T) {
	tm := startProgram(t)
	tm.Send(keyMsg("tab"))
	tm.Send(keyMsg("/"))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("failed")})
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("filter: failed")) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	m := finalModel(t, tm)
	if len(m.list.rows) == 0 || len(m.list.rows) == m.list.total {
		t.Fatalf("the filter kept %d of %d rows", len(m.list.rows), m.list.total)
	}
	for _, r := range m.list.rows {
		if r.OK() {
			t.Fatalf("%s passed the filter `failed` but succeeded", r.ID)
		}
	}

	m2, _, _ := session(t, synthOpts{}, Options{}, 60, 120, 40)
	press(m2, "tab", "/")
	for _, r := range "ttft>300 ok" {
		m2.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	press(m2, "enter")
	if len(m2.list.rows) == 0 {
		t.Fatal("no request of at least 300 ms")
	}
	for _, r := range m2.list.rows {
		if !r.OK() || r.TTFT < 300*time.Millisecond {
			t.Fatalf("%s (ttft %v, %s) passed ttft>300 ok", r.ID, r.TTFT, r.Outcome)
		}
	}
	press(m2, "/", "esc")
	if len(m2.list.rows) != m2.list.total {
		t.Fatalf("esc left %d of %d rows", len(m2.list.rows), m2.list.total)
	}
	press(m2, "/")
	m2.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("ttft>fast")})
	press(m2, "enter")
	if !m2.typing || !strings.Contains(m2.View(), "want a TTFT") {
		t.Fatal("a filter it cannot read was applied or not explained")
	}
}

// A click on a legend entry picks its stage: its segment alone stays on
// the bar and its table row is marked; a second click lets go.
func TestLegendClickHighlightsAStage(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{}, 60, 160, 48)
	var hit legendHit
	for _, h := range m.legendHits {
		if h.stage == event.StageQueue {
			hit = h
		}
	}
	if hit.stage == "" {
		t.Fatalf("no legend entry for queue: %+v", m.legendHits)
	}
	m.Update(leftClick(hit.from+1, hit.line))
	if m.highlight != event.StageQueue {
		t.Fatalf("picked %q, want queue", m.highlight)
	}
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	bar := lines[headerLines+1]
	if !strings.Contains(bar, "qqq") || strings.ContainsAny(bar, "ptf") {
		t.Errorf("the bar does not show queue alone: %q", bar)
	}
	marked := false
	for _, l := range lines {
		marked = marked || strings.HasPrefix(l, "▸queue ")
	}
	if !marked || !strings.Contains(lines[hit.line], "▸q queue") {
		t.Errorf("the table row or the legend entry is not marked:\n%s", strings.Join(lines, "\n"))
	}
	m.Update(leftClick(hit.from+1, hit.line))
	if m.highlight != "" {
		t.Fatalf("a second click kept %q", m.highlight)
	}
}
