package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/latscope/latscope/aggregate"
)

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func TestQuitKeys(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		m, _, _ := session(t, synthOpts{}, Options{}, 3, 100, 30)
		if !isQuit(press(m, k)) {
			t.Errorf("%s does not quit", k)
		}
	}
}

func TestHelpKey(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{}, 3, 100, 30)
	press(m, "?")
	if !m.showHelp || !strings.Contains(m.View(), "reading") && !strings.Contains(m.View(), "help") {
		t.Fatal("? does not open the help")
	}
	press(m, "w") // ignored while help is open
	if m.window != 0 {
		t.Errorf("w changed the window behind the help")
	}
	press(m, "esc")
	if m.showHelp {
		t.Fatal("esc does not close the help")
	}
	press(m, "?", "?")
	if m.showHelp {
		t.Fatal("? does not toggle the help")
	}
}

func TestPauseKeepsTheScreenWhileDataArrives(t *testing.T) {
	m, s, feed := session(t, synthOpts{}, Options{}, 5, 100, 30)
	press(m, "p")
	if !strings.Contains(m.View(), "PAUSED") {
		t.Fatal("paused screen does not say PAUSED")
	}
	frozen := m.frame.Snapshot.Now
	s.advance(3)
	feed.set(s.frame())
	m.Update(tickMsg{})
	if !m.frame.Snapshot.Now.Equal(frozen) {
		t.Fatal("a paused screen took a new frame")
	}
	if m.hist.last != s.frame().Snapshot.Now.Unix() {
		t.Error("the history stopped recording while paused")
	}
	press(m, "p")
	if strings.Contains(m.View(), "PAUSED") || !m.frame.Snapshot.Now.After(frozen) {
		t.Fatal("resuming does not show the newest frame at once")
	}
}

func TestWindowAndStatKeysCycle(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{}, 20, 120, 40)
	wantWin := []string{"[1m]", "[5m]", "[run]", "[10s]"}
	for _, want := range wantWin {
		press(m, "w")
		if !strings.Contains(m.View(), want) {
			t.Errorf("after w the header lacks %s", want)
		}
	}
	press(m, "W")
	if m.window != aggregate.WinRun {
		t.Errorf("W went to %v, want run", m.window)
	}
	wantStat := []string{"p50 band", "p90 band", "p99 band: slowest 1%", "mean of"}
	for _, want := range wantStat {
		press(m, "s")
		if !strings.Contains(m.View(), want) {
			t.Errorf("after s the bar title lacks %q", want)
		}
	}
	press(m, "S")
	if m.stat != aggregate.BandP99 {
		t.Errorf("S went to %v, want p99", m.stat)
	}
}

func TestRequestsViewKeys(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{}, 20, 120, 40)
	press(m, "tab")
	if m.screen != screenRequests || !strings.Contains(m.View(), "slowest in 10s") {
		t.Fatal("tab does not open the requests view")
	}
	first := m.list.rows[0].ID
	press(m, "j", "down")
	if m.sel != 2 {
		t.Fatalf("j, down: selection %d, want 2", m.sel)
	}
	press(m, "k", "up", "up")
	if m.sel != 0 || m.selID != first {
		t.Fatalf("k, up, up: selection %d (%s), want 0 (%s)", m.sel, m.selID, first)
	}
	press(m, "down", "enter")
	if m.screen != screenWaterfall || m.open == nil || !strings.Contains(m.View(), "request "+m.open.ID) {
		t.Fatal("enter does not open the waterfall of the selected request")
	}
	press(m, "esc")
	if m.screen != screenRequests {
		t.Fatal("esc from the waterfall does not go back to the list")
	}
	press(m, "esc")
	if m.screen != screenMain {
		t.Fatal("esc from the list does not go back to the main view")
	}
	press(m, "tab", "tab")
	if m.screen != screenMain {
		t.Fatal("tab does not go back to the main view")
	}
	press(m, "enter", "j") // nothing to open or move on the main view
	if m.screen != screenMain || m.sel != 0 {
		t.Fatal("enter or j did something on the main view")
	}
}

func TestSelectionFollowsTheRequestWhileListed(t *testing.T) {
	m, s, feed := session(t, synthOpts{}, Options{Window: aggregate.WinRun}, 20, 120, 40)
	press(m, "tab", "j", "j", "j")
	id := m.selID
	s.advance(1)
	feed.set(s.frame())
	m.Update(tickMsg{})
	if m.selID != id || m.list.rows[m.sel].ID != id {
		t.Fatalf("selection moved from %s to %s as new requests arrived", id, m.list.rows[m.sel].ID)
	}
}

// replayFeed is a Feed that seeks and pauses, like a replay.
type replayFeed struct {
	stepFeed
	seeks  []time.Duration
	paused bool
}

func (f *replayFeed) Seek(by time.Duration) { f.seeks = append(f.seeks, by) }
func (f *replayFeed) TogglePause() bool     { f.paused = !f.paused; return f.paused }

func TestReplayKeys(t *testing.T) {
	s := newSynth(synthOpts{})
	s.advance(5)
	feed := &replayFeed{}
	feed.set(s.frame())
	m := newModel(feed, Options{}, plainRenderer())
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(tickMsg{})
	if !strings.Contains(m.View(), "seek") {
		t.Error("the footer does not offer seeking on a replay")
	}
	press(m, "left", "right", "right")
	if want := []time.Duration{-seekStep, seekStep, seekStep}; len(feed.seeks) != 3 || feed.seeks[0] != want[0] || feed.seeks[2] != want[2] {
		t.Fatalf("seeks %v, want %v", feed.seeks, want)
	}
	press(m, " ")
	if !feed.paused || !strings.Contains(m.View(), "PLAYBACK PAUSED") {
		t.Fatal("space does not pause playback")
	}
	press(m, " ")
	if feed.paused || strings.Contains(m.View(), "PLAYBACK PAUSED") {
		t.Fatal("space does not resume playback")
	}
}

func TestSeekKeysNeedAReplay(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{}, 3, 120, 40)
	press(m, "left", " ")
	if strings.Contains(m.View(), "seek") || strings.Contains(m.View(), "PLAYBACK") {
		t.Fatal("a live feed offers seeking or playback")
	}
}
