package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/event"
)

// Forty frames of a stream that changes the way a demo does (new
// connections bring dns and connect stages for a few seconds, warnings and
// notices come and go): the stage table's header stays on one row, the
// header keeps the load, the time and the help hint, and the last line
// keeps ? and q, at every golden size.
func TestLayoutDoesNotMove(t *testing.T) {
	for _, size := range goldenSizes {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			s := newSynth(synthOpts{simulated: true, gpuSim: true})
			feed := &stepFeed{}
			m := newModel(feed, Options{Objectives: testSLO}, plainRenderer())
			m.Update(sizeMsg(w, h))
			rows := map[int]int{}
			for i := range 40 {
				s.advance(1)
				if i%7 < 2 { // a burst of new connections
					s.add(event.NewRequest(newConnection(s, i)))
				}
				fr := s.frame()
				if i%4 < 2 {
					fr.Status = []string{"agent eu-1: reconnecting (attempt 3)"}
				}
				if i%5 == 0 {
					fr.Notices = []string{"recording to run.lsr"}
				}
				feed.set(fr)
				m.Update(tickMsg{})
				lines := strings.Split(ansi.Strip(m.View()), "\n")
				row := -1
				for j, l := range lines {
					if strings.HasPrefix(l, " stages (") {
						row = j
						break
					}
				}
				rows[row]++
				top, last := lines[0], lines[len(lines)-1]
				for _, want := range []string{"closed loop c=16", fmt.Sprintf("00:00:%02d", i+1), "? help", "SIMULATED"} {
					if !strings.Contains(top, want) {
						t.Fatalf("frame %d: header lacks %q: %q", i, want, top)
					}
				}
				if !strings.HasSuffix(strings.TrimRight(last, " "), "? help • q quit") {
					t.Fatalf("frame %d: footer lacks ? and q: %q", i, last)
				}
			}
			if len(rows) != 1 || rows[-1] > 0 {
				t.Fatalf("the stage table's header moved: on rows %v (row: frames)", rows)
			}
		})
	}
}

// newConnection is a request that opened a connection: dns and connect
// before the rest.
func newConnection(s *synth, i int) *event.Request {
	at := t0.Add(time.Duration(s.sec)*time.Second - 500*time.Millisecond)
	r := s.request(at, 0.5)
	r.ID = fmt.Sprintf("conn-%d", i)
	conn := []event.StageTiming{
		{Stage: event.StageDNS, Duration: 2 * time.Millisecond, Provenance: event.Measured},
		{Stage: event.StageConnect, Duration: 3 * time.Millisecond, Provenance: event.Measured},
	}
	r.Stages = append(conn, r.Stages...)
	r.Breakdown = append(conn, r.Breakdown...)
	r.TTFT += 5 * time.Millisecond
	r.E2E += 5 * time.Millisecond
	return r
}

// A GPU's name is shown whole wherever the panel has room for it.
func TestGPUNameWhole(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	g := &event.GPUSample{Available: true, Simulated: true, Devices: []event.GPUDevice{{Name: "Simulated H100 80GB", MemTotal: 80 << 30}}}
	for _, c := range []struct {
		width     int
		histories bool
	}{{40, false}, {60, true}, {68, true}} {
		v := strings.Join(renderGPU(st, g, &gpuHistory{}, c.histories, c.width, 6), "\n")
		if !strings.Contains(v, "Simulated H100 80GB") {
			t.Errorf("%d cells, histories %v: name cut:\n%s", c.width, c.histories, v)
		}
	}
}

// The waterfall's provenance is never cut: a long one wraps under itself.
func TestWaterfallProvenanceWhole(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	s := newSynth(synthOpts{})
	r := s.request(t0, 0.5)
	long := "otlp (front end and queue, not told apart)"
	r.Breakdown[5].Source = long
	r.Breakdown[3].Source = "connect_rtt from the TCP handshake"
	for _, w := range []int{80, 120, 200} {
		lines := renderWaterfall(st, r, nil, w, 40)
		text := strings.Join(lines, "\n")
		if strings.Contains(text, "…") {
			t.Errorf("%d cells: something cut:\n%s", w, text)
		}
		joined := strings.Join(strings.Fields(text), " ")
		for _, want := range []string{"server (" + long + ")", "estimated (connect_rtt from the TCP handshake)"} {
			if !strings.Contains(joined, want) {
				t.Errorf("%d cells: provenance %q not whole:\n%s", w, want, text)
			}
		}
	}
}

// At 200 columns the GPU panel widens for a long device name.
func TestGPUPanelWidensForItsName(t *testing.T) {
	g := &event.GPUSample{Available: true, Devices: []event.GPUDevice{{Name: "Simulated H100 80GB (latscope demo)"}}}
	if got := gpuWidth(g, layoutMain(200, 50, 3, 7, 15, 1), 200); got < gpuLineWidth(35, 8) {
		t.Fatalf("GPU panel %d cells at 200 columns, want room for the name and 8-cell histories", got)
	}
	if got := gpuWidth(g, layoutMain(120, 40, 3, 7, 15, 1), 120); got > 60 {
		t.Fatalf("GPU panel %d cells at 120 columns: more than half", got)
	}
}
