package tui

import (
	"fmt"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
)

// The main, requests, waterfall and help views at the smallest supported
// size and a large one, from the synthetic session.
func TestGolden(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		w, h := size[0], size[1]
		m, _, _ := session(t, synthOpts{}, Options{Window: 1, Objectives: testSLO}, 150, w, h)
		name := fmt.Sprintf("%dx%d", w, h)
		t.Run("main_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "tab")
		t.Run("requests_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "enter")
		t.Run("waterfall_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
		press(m, "esc", "esc", "?")
		t.Run("help_"+name, func(t *testing.T) { golden.RequireEqual(t, m.View()) })
	}
}

// The main view at 120×40 as shown in the package documentation.
func TestCapture120x40(t *testing.T) {
	m, _, _ := session(t, synthOpts{}, Options{Window: 1, Objectives: testSLO}, 150, 120, 40)
	golden.RequireEqual(t, m.View())
}
