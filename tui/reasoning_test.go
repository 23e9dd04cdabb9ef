package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// A reasoning model's dashboard says which first token the TTFT bar and
// the objectives measure to, lists the answer TTFT, the thinking stage and
// the time to the second token, and ends the bar with the thinking.
func TestDashboardShowsReasoning(t *testing.T) {
	m, _, _ := session(t, synthOpts{reasoning: 16}, Options{Window: aggregate.WinRun}, 30, 160, 60)
	view := ansi.Strip(m.View())
	for _, want := range []string{"reasoning model: TTFT to the answer (after the thinking)", "ttft_answer", "thinking", "ttst"} {
		if !strings.Contains(view, want) {
			t.Errorf("dashboard lacks %q:\n%s", want, view)
		}
	}
	band := m.frame.Snapshot.Windows[aggregate.WinRun].Bands[aggregate.BandMean]
	th := band.Stages[event.StageThinking]
	if th < 16*17 || band.TTFT < th+100 {
		t.Errorf("mean band: ttft %.1f ms with thinking %.1f ms; want the ~16 × 22 ms of thinking in the bar", band.TTFT, th)
	}
}
