package collector

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latscope/latscope/event"
)

// hostRoot is a fake /proc: a temp directory the tests fill with fixtures.
type hostRoot struct {
	t   *testing.T
	dir string
}

func newHostRoot(t *testing.T) hostRoot {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"pressure", "self"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return hostRoot{t: t, dir: dir}
}

// set copies the fixtures into place: pressure/cpu, stat, self/stat (an
// empty name removes the file).
func (r hostRoot) set(psi, stat, self string) {
	r.t.Helper()
	for name, fixture := range map[string]string{"pressure/cpu": psi, "stat": stat, "self/stat": self} {
		path := filepath.Join(r.dir, name)
		if fixture == "" {
			_ = os.Remove(path)
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", "host", fixture))
		if err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// stepClock is a clock the test moves.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { return c.t }

func collect(h *Host) (samples []*event.HostSample, markers []*event.Marker) {
	h.step(func(ev event.Event) {
		switch {
		case ev.Host != nil:
			samples = append(samples, ev.Host)
		case ev.Marker != nil:
			markers = append(markers, ev.Marker)
		}
	})
	return samples, markers
}

func near(got *float64, want float64) bool {
	return got != nil && *got > want-1e-9 && *got < want+1e-9
}

// TestHostSampleDeltas: the first sample carries the kernel's avg10 and the
// run queue; the next one the pressure, steal and latscope's CPU over the
// interval, from the counters' deltas.
func TestHostSampleDeltas(t *testing.T) {
	root := newHostRoot(t)
	clock := &stepClock{t: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	h := NewHost(HostConfig{Root: root.dir, Now: clock.now})

	root.set("pressure_cpu_calm", "stat_calm", "self_stat_a")
	first, markers := collect(h)
	if len(first) != 1 || len(markers) != 0 {
		t.Fatalf("first step: %d samples, markers %v", len(first), markers)
	}
	s := first[0]
	if !s.Available || s.Interval != 0 || s.PSISome != nil || s.Steal != nil || s.SelfCPU != nil {
		t.Fatalf("first sample has deltas: %+v", s)
	}
	if !near(s.PSISomeAvg10, 0) || s.RunQueue == nil || *s.RunQueue != 1 || s.Cores != 2 {
		t.Fatalf("first sample: %+v", s)
	}

	clock.t = clock.t.Add(time.Second)
	root.set("pressure_cpu_busy", "stat_busy", "self_stat_b")
	second, _ := collect(h)
	s = second[0]
	if s.Interval != time.Second || !near(s.PSISome, 0.38) || !near(s.PSISomeAvg10, 0.382) ||
		!near(s.Steal, 0) || !near(s.SelfCPU, 0.07) || *s.RunQueue != 9 {
		t.Fatalf("second sample: %+v psi %v steal %v self %v", s, *s.PSISome, *s.Steal, *s.SelfCPU)
	}
	if _, err := event.Marshal(event.NewHost(s)); err != nil {
		t.Fatal(err)
	}
}

// TestHostUnavailableOnce: without /proc the collector says so once and
// then emits nothing, however often it is asked.
func TestHostUnavailableOnce(t *testing.T) {
	root := newHostRoot(t)
	h := NewHost(HostConfig{Root: root.dir})
	samples, markers := collect(h)
	if len(samples) != 1 || samples[0].Available || len(markers) != 1 ||
		!strings.Contains(markers[0].Message, "host pressure unavailable") {
		t.Fatalf("first: samples %+v markers %+v", samples, markers)
	}
	for range 3 {
		if s, m := collect(h); len(s)+len(m) != 0 {
			t.Fatalf("said it again: %+v %+v", s, m)
		}
	}
}

// TestHostWithoutPSI: a kernel without PSI still gives steal and the run
// queue; the missing file is named once.
func TestHostWithoutPSI(t *testing.T) {
	root := newHostRoot(t)
	clock := &stepClock{t: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	h := NewHost(HostConfig{Root: root.dir, Now: clock.now})
	root.set("", "stat_calm", "self_stat_a")
	s, m := collect(h)
	if len(s) != 1 || !s[0].Available || s[0].PSISomeAvg10 != nil || len(m) != 1 || !strings.Contains(m[0].Message, "PSI") {
		t.Fatalf("samples %+v markers %+v", s, m)
	}
	clock.t = clock.t.Add(time.Second)
	root.set("", "stat_busy", "self_stat_b")
	s, m = collect(h)
	if len(m) != 0 || s[0].PSISome != nil || !near(s[0].Steal, 0) {
		t.Fatalf("samples %+v markers %+v", s, m)
	}
}

// TestHostRunTicks: Run samples at once and then every interval, and
// returns when its context ends (on a fake clock).
func TestHostRunTicks(t *testing.T) {
	root := newHostRoot(t)
	root.set("pressure_cpu_calm", "stat_calm", "self_stat_a")
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var samples []*event.HostSample
		done := make(chan error)
		go func() {
			done <- NewHost(HostConfig{Root: root.dir}).Run(ctx, func(ev event.Event) {
				if ev.Host != nil {
					samples = append(samples, ev.Host)
				}
			})
		}()
		time.Sleep(3*DefaultHostInterval + DefaultHostInterval/2)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(samples) != 4 {
			t.Fatalf("%d samples in 3.5 intervals, want 4", len(samples))
		}
		if samples[1].Interval != DefaultHostInterval {
			t.Fatalf("interval %v", samples[1].Interval)
		}
	})
}
