package collector

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// collectGPU runs c until it has emitted wantSamples GPU samples (then
// cancels it) or returned by itself, and returns every event it emitted.
// Every event must encode.
func collectGPU(t *testing.T, c pipeline.Source, wantSamples int) []event.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		events  []event.Event
		samples int
	)
	emit := func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
		if e.GPU != nil {
			samples++
			if samples >= wantSamples {
				cancel()
			}
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, emit) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if _, err := event.Marshal(e); err != nil {
			t.Errorf("emitted event does not encode: %v", err)
		}
	}
	return events
}

// splitGPUEvents separates GPU samples from markers.
func splitGPUEvents(t *testing.T, events []event.Event) (samples []*event.GPUSample, markers []*event.Marker) {
	t.Helper()
	for _, e := range events {
		switch {
		case e.GPU != nil:
			samples = append(samples, e.GPU)
		case e.Marker != nil:
			markers = append(markers, e.Marker)
		default:
			t.Errorf("unexpected event kind %q", e.Kind)
		}
	}
	return samples, markers
}

// checkGPUUnavailable asserts exactly one unavailable sample and one collector
// marker with the same line, containing wantReason.
func checkGPUUnavailable(t *testing.T, events []event.Event, wantReason string) {
	t.Helper()
	samples, markers := splitGPUEvents(t, events)
	if len(samples) != 1 || len(markers) != 1 {
		t.Fatalf("got %d samples and %d markers, want 1 and 1", len(samples), len(markers))
	}
	s, m := samples[0], markers[0]
	if s.Available || len(s.Devices) != 0 {
		t.Errorf("sample = %+v, want unavailable with no devices", s)
	}
	if !strings.HasPrefix(s.Reason, nvmlUnavailablePrefix) || !strings.Contains(s.Reason, wantReason) {
		t.Errorf("reason = %q, want %q after %q", s.Reason, wantReason, nvmlUnavailablePrefix)
	}
	if m.Kind != event.MarkerCollector || m.Source != gpuSource || m.Message != s.Reason {
		t.Errorf("marker = %+v, want a %s marker from %s saying %q", m, event.MarkerCollector, gpuSource, s.Reason)
	}
}

// TestGPUOnThisMachine runs the real collector as built (NVML with cgo, the
// stub without): on a machine with no NVIDIA driver it reports unavailable
// once and returns.
func TestGPUOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		t.Skip("this machine has an NVIDIA GPU")
	}
	g := NewGPU(GPUConfig{Interval: 10 * time.Millisecond})
	ok, line := g.Probe()
	if ok {
		t.Fatalf("Probe() = true, %q; want unavailable", line)
	}
	known := []string{"NVML library not found (no NVIDIA driver installed)", "built without cgo (NVML needs cgo)", "Linux only"}
	if !gpuContainsAny(line, known) {
		t.Errorf("Probe reason %q names none of %q", line, known)
	}
	events := collectGPU(t, g, 1)
	checkGPUUnavailable(t, events, strings.TrimPrefix(line, nvmlUnavailablePrefix))
}

// gpuContainsAny reports whether s contains one of subs.
func gpuContainsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestGPUConfigDefaults(t *testing.T) {
	got := GPUConfig{}.withDefaults()
	if got.Interval != DefaultGPUInterval || got.Now == nil {
		t.Errorf("defaults = %+v, want interval %v and a clock", got, DefaultGPUInterval)
	}
	got = GPUConfig{Interval: 5 * time.Second, Devices: []int{1}}.withDefaults()
	if got.Interval != 5*time.Second || !reflect.DeepEqual(got.Devices, []int{1}) {
		t.Errorf("withDefaults changed set fields: %+v", got)
	}
}

func TestSelectGPUs(t *testing.T) {
	tests := []struct {
		name    string
		count   int
		want    []int
		got     []int
		wantErr string
	}{
		{name: "all", count: 3, got: []int{0, 1, 2}},
		{name: "none present, none asked", count: 0, got: []int{}},
		{name: "subset keeps order", count: 4, want: []int{2, 0}, got: []int{2, 0}},
		{name: "repeats dropped", count: 2, want: []int{1, 1, 0, 1}, got: []int{1, 0}},
		{name: "missing index", count: 2, want: []int{0, 2}, wantErr: "GPU index 2 not found: this machine has 2 GPUs (indices 0-1)"},
		{name: "negative index", count: 1, want: []int{-1}, wantErr: "GPU index -1 not found: this machine has 1 GPU (index 0)"},
		{name: "no GPUs", count: 0, want: []int{0}, wantErr: "GPU index 0 not found: this machine has no GPUs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectGPUs(tt.count, tt.want)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.got) {
				t.Errorf("selectGPUs(%d, %v) = %v, %v; want %v", tt.count, tt.want, got, err, tt.got)
			}
		})
	}
}

func TestGPUDecodeClockReasons(t *testing.T) {
	tests := []struct {
		mask uint64
		want []string
	}{
		{0, nil},
		{0x1, []string{"gpu_idle"}},
		{0x4, []string{"sw_power_cap"}},
		{0x8 | 0x40, []string{"hw_slowdown", "hw_thermal"}},
		{0x8 | 0x80, []string{"hw_slowdown", "hw_power_brake"}},
		{0x2 | 0x10 | 0x20, []string{"applications_clocks_setting", "sync_boost", "sw_thermal"}},
		{0x100 | 0x200 | 0x400, []string{"display_clock_setting", "board_limit", "reliability"}},
		{0x4 | 0x1000 | 0x8000, []string{"sw_power_cap", "unknown_0x9000"}},
	}
	for _, tt := range tests {
		if got := decodeClockReasons(tt.mask); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("decodeClockReasons(%#x) = %q, want %q", tt.mask, got, tt.want)
		}
	}
}

func TestGPUProcessName(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "4242", "comm"), []byte("python3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := gpuProcessName(root, 4242); got != "python3" {
		t.Errorf("gpuProcessName(4242) = %q, want python3", got)
	}
	if got := gpuProcessName(root, 999); got != "" {
		t.Errorf("gpuProcessName of a missing process = %q, want empty", got)
	}
	// The real /proc knows this test binary.
	if _, err := os.Stat("/proc/self/comm"); err == nil {
		if got := gpuProcessName("/proc", uint32(os.Getpid())); got == "" {
			t.Errorf("gpuProcessName(/proc, own pid %d) is empty", os.Getpid())
		}
	}
}

func TestSimulatedGPUIsLabelled(t *testing.T) {
	load := func() SimLoad { return SimLoad{BusyFraction: 0.5, BatchSize: 8, KVUsage: 0.3} }
	sim := NewSimulatedGPU(GPUConfig{Interval: time.Millisecond, Devices: []int{3}}, load)
	samples, markers := splitGPUEvents(t, collectGPU(t, sim, 3))
	if len(samples) < 3 || len(markers) != 0 {
		t.Fatalf("got %d samples and %d markers, want at least 3 and none", len(samples), len(markers))
	}
	for _, s := range samples {
		if !s.Simulated || !s.Available || len(s.Devices) != 1 {
			t.Fatalf("sample = %+v, want one available, simulated device", s)
		}
		d := s.Devices[0]
		if !strings.Contains(d.Name, "Simulated") || !strings.Contains(d.UUID, "SIMULATED") {
			t.Errorf("device %q / %q does not say it is simulated", d.Name, d.UUID)
		}
		for _, p := range d.Processes {
			if !strings.Contains(p.Name, "simulated") {
				t.Errorf("process %q does not say it is simulated", p.Name)
			}
		}
	}
}

func TestSimulatedGPUTracksLoad(t *testing.T) {
	m := newSimModel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := 0
	run := func(l SimLoad, seconds int) event.GPUDevice {
		var d event.GPUDevice
		for range seconds {
			d = m.step(start.Add(time.Duration(tick)*time.Second), l)
			tick++
		}
		return d
	}

	idle := run(SimLoad{}, 60)
	if idle.UtilGPU != 0 || !reflect.DeepEqual(idle.ThrottleReason, []string{"gpu_idle"}) {
		t.Errorf("idle: util %d%%, reasons %q; want 0%% and gpu_idle", idle.UtilGPU, idle.ThrottleReason)
	}

	light := run(SimLoad{BusyFraction: 0.3, BatchSize: 4, KVUsage: 0.1}, 60)
	full := run(SimLoad{BusyFraction: 1, BatchSize: 128, KVUsage: 0.9}, 60)
	if !(idle.UtilGPU < light.UtilGPU && light.UtilGPU < full.UtilGPU) || full.UtilGPU != 100 {
		t.Errorf("utilization idle/light/full = %d/%d/%d, want rising to 100", idle.UtilGPU, light.UtilGPU, full.UtilGPU)
	}
	for _, f := range []struct {
		name              string
		idle, light, full uint64
	}{
		{"power", uint64(idle.PowerMilliW), uint64(light.PowerMilliW), uint64(full.PowerMilliW)},
		{"temperature", uint64(idle.TempC), uint64(light.TempC), uint64(full.TempC)},
		{"memory", idle.MemUsed, light.MemUsed, full.MemUsed},
		{"memory utilization", uint64(idle.UtilMem), uint64(light.UtilMem), uint64(full.UtilMem)},
	} {
		if !(f.idle < f.light && f.light < f.full) {
			t.Errorf("%s idle/light/full = %d/%d/%d, want rising with load", f.name, f.idle, f.light, f.full)
		}
	}
	if full.PowerMilliW > full.PowerLimitMW || full.MemUsed > full.MemTotal {
		t.Errorf("full load exceeds a limit: power %d/%d mW, memory %d/%d", full.PowerMilliW, full.PowerLimitMW, full.MemUsed, full.MemTotal)
	}
	if !reflect.DeepEqual(full.ThrottleReason, []string{"sw_power_cap"}) || full.SMClockMHz >= full.SMClockMaxMHz {
		t.Errorf("full load: clock %d/%d MHz, reasons %q; want power-capped below max", full.SMClockMHz, full.SMClockMaxMHz, full.ThrottleReason)
	}
	if light.SMClockMHz != light.SMClockMaxMHz || light.ThrottleReason != nil {
		t.Errorf("light load: clock %d/%d MHz, reasons %q; want max clock, no reasons", light.SMClockMHz, light.SMClockMaxMHz, light.ThrottleReason)
	}

	// Smoothing: one second after the load drops, power has fallen but not
	// all the way to idle.
	before := full.PowerMilliW
	after := run(SimLoad{}, 1)
	if !(after.PowerMilliW < before && after.PowerMilliW > idle.PowerMilliW) || after.UtilGPU != 0 {
		t.Errorf("1 s after load stops: power %d mW (was %d, idle %d), util %d; want falling gradually", after.PowerMilliW, before, idle.PowerMilliW, after.UtilGPU)
	}
}

func TestSimulatedGPUBadLoad(t *testing.T) {
	m := newSimModel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, l := range []SimLoad{
		{BusyFraction: math.NaN(), BatchSize: -5, KVUsage: math.Inf(1)},
		{BusyFraction: -3, KVUsage: -1},
		{BusyFraction: 7, BatchSize: math.MaxInt, KVUsage: math.NaN()},
	} {
		d := m.step(now.Add(time.Duration(i)*time.Second), l)
		if d.UtilGPU > 100 || d.UtilMem > 100 || d.MemUsed > d.MemTotal || d.PowerMilliW > d.PowerLimitMW {
			t.Errorf("load %+v gave out-of-range device %+v", l, d)
		}
	}
	// A nil load function means idle.
	sim := NewSimulatedGPU(GPUConfig{Interval: time.Millisecond}, nil)
	samples, _ := splitGPUEvents(t, collectGPU(t, sim, 1))
	if got := samples[0].Devices[0].UtilGPU; got != 0 {
		t.Errorf("nil load: util %d, want 0", got)
	}
}

func TestSimulatedGPUStampsWithClock(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	sim := NewSimulatedGPU(GPUConfig{Interval: time.Millisecond, Now: func() time.Time { return at }}, nil)
	samples, _ := splitGPUEvents(t, collectGPU(t, sim, 2))
	for i, s := range samples {
		if !s.Time.Equal(at) {
			t.Errorf("sample %d time = %v, want %v", i, s.Time, at)
		}
	}
}

// TestSimulatedGPUStopsWhenCancelled checks that an already cancelled
// context emits nothing.
func TestSimulatedGPUStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	err := NewSimulatedGPU(GPUConfig{}, nil).Run(ctx, func(event.Event) { n++ })
	if err != nil || n != 0 {
		t.Errorf("Run on a cancelled context = %v with %d events, want nil and none", err, n)
	}
}

// TestSimulatedGPUTimesNeverGoBack: a clock stepped back (as a wall clock
// may be) does not put a sample before the one it follows.
func TestSimulatedGPUTimesNeverGoBack(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	var mu sync.Mutex
	step := time.Duration(0)
	clock := func() time.Time { // +10 s, -7 s, +10 s, ...
		mu.Lock()
		defer mu.Unlock()
		step++
		return at.Add(step/2*3*time.Second + step%2*10*time.Second)
	}
	sim := NewSimulatedGPU(GPUConfig{Interval: time.Millisecond, Now: clock}, nil)
	samples, _ := splitGPUEvents(t, collectGPU(t, sim, 6))
	for i := 1; i < len(samples); i++ {
		if samples[i].Time.Before(samples[i-1].Time) {
			t.Fatalf("sample %d at %v follows one at %v", i, samples[i].Time, samples[i-1].Time)
		}
	}
}
