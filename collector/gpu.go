package collector

// This file holds the parts of the GPU collector that need no NVML: the
// configuration, the "unavailable" report, device selection, the decoding of
// clock-event reasons, process names, and the simulated GPU of the demo. The
// NVML reader is in gpu_nvml.go (linux && cgo) and its stand-in for other
// builds in gpu_nvml_stub.go.

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/eventclock"
)

// DefaultGPUInterval is how often the GPU collector samples when
// GPUConfig.Interval is zero. NVML's process listing is slow enough that
// sampling much faster than 1 Hz is not worth it.
const DefaultGPUInterval = time.Second

// gpuSource names the GPU collector in markers.
const gpuSource = "collector.gpu"

// nvmlUnavailablePrefix starts every reason the GPU collector gives for not
// reporting GPUs, so the dashboard and the CLI print the same line.
const nvmlUnavailablePrefix = "NVML unavailable: "

// nvmlNoGPUsReason is given when NVML works but sees no device. The sample then
// says Available=false: there is nothing to show, as event.GPUSample documents.
const nvmlNoGPUsReason = "no GPUs found"

// GPUConfig configures the GPU collector and the simulated GPU.
type GPUConfig struct {
	// Interval between samples (--gpu-interval); zero means DefaultGPUInterval.
	Interval time.Duration
	// Devices lists the NVML indices to watch (--gpu 0,2); empty means all.
	Devices []int
	// Now stamps the samples; nil means time.Now.
	Now func() time.Time
}

// withDefaults returns cfg with its zero fields filled in.
func (cfg GPUConfig) withDefaults() GPUConfig {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultGPUInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// emitGPUUnavailable reports that no GPU can be shown: one sample for the GPU
// panel and one marker for the timeline, both carrying the same line.
func emitGPUUnavailable(emit func(event.Event), now time.Time, reason string) {
	line := nvmlUnavailablePrefix + reason
	emit(event.NewGPU(&event.GPUSample{Time: now, Available: false, Reason: line, Collector: event.GPUCollectorNVML}))
	emit(event.NewMarker(&event.Marker{Time: now, Kind: event.MarkerCollector, Source: gpuSource, Message: line}))
}

// selectGPUs returns the indices to sample among count devices: all of
// them when want is empty, else want in its order without repeats. An index
// the machine does not have is an error, not a crash.
func selectGPUs(count int, want []int) ([]int, error) {
	if len(want) == 0 {
		all := make([]int, count)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	picked := make([]int, 0, len(want))
	for _, i := range want {
		if i < 0 || i >= count {
			return nil, fmt.Errorf("GPU index %d not found: this machine has %s", i, describeGPUCount(count))
		}
		if !slices.Contains(picked, i) {
			picked = append(picked, i)
		}
	}
	return picked, nil
}

// describeGPUCount says how many GPUs there are and which indices are valid.
func describeGPUCount(count int) string {
	switch count {
	case 0:
		return "no GPUs"
	case 1:
		return "1 GPU (index 0)"
	default:
		return fmt.Sprintf("%d GPUs (indices 0-%d)", count, count-1)
	}
}

// clockReason names one bit of NVML's clock-event (formerly "throttle")
// reason mask. The bit values are those of nvml.h; gpu_nvml_test.go checks
// them against go-nvml's constants.
type clockReason struct {
	bit  uint64
	name string
}

// clockReasons lists the known bits in the order they are shown. NVML sets
// hw_slowdown together with hw_thermal or hw_power_brake, which say why.
var clockReasons = [...]clockReason{
	{0x1, "gpu_idle"},
	{0x2, "applications_clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal"},
	{0x40, "hw_thermal"},
	{0x80, "hw_power_brake"},
	{0x100, "display_clock_setting"},
	{0x200, "board_limit"},
	{0x400, "reliability"},
}

// decodeClockReasons turns a reason mask into short names; bits this build
// does not know come out as one "unknown_0x..." entry.
func decodeClockReasons(mask uint64) []string {
	var names []string
	for _, r := range clockReasons {
		if mask&r.bit != 0 {
			names = append(names, r.name)
			mask &^= r.bit
		}
	}
	if mask != 0 {
		names = append(names, "unknown_0x"+strconv.FormatUint(mask, 16))
	}
	return names
}

// gpuProcessName reads a process's command name from <procRoot>/<pid>/comm, or
// returns "" when it cannot (the process is gone, or belongs to another PID
// namespace that this one cannot see).
func gpuProcessName(procRoot string, pid uint32) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SimLoad is the simulated server's load that drives the simulated GPU.
type SimLoad struct {
	BusyFraction float64 // share of the last interval the engine was computing, 0..1
	BatchSize    int     // requests in the running batch
	KVUsage      float64 // KV cache use, 0..1
}

// SimulatedGPU invents GPU readings from the demo simulator's load, so the
// demo's GPU panel moves with the traffic. Every sample it emits has
// Simulated set and a device name that says so; it never pretends to be NVML.
type SimulatedGPU struct {
	cfg  GPUConfig
	load func() SimLoad
}

// NewSimulatedGPU returns a simulated one-GPU collector. load is called once
// per interval; nil means an idle server. cfg.Devices is ignored: there is
// exactly one simulated device, index 0.
func NewSimulatedGPU(cfg GPUConfig, load func() SimLoad) *SimulatedGPU {
	if load == nil {
		load = func() SimLoad { return SimLoad{} }
	}
	return &SimulatedGPU{cfg: cfg.withDefaults(), load: load}
}

// Run emits one simulated sample at once and then one per interval until ctx
// ends. It always returns nil. The model's state lives in this call, so
// concurrent Runs do not share it.
func (s *SimulatedGPU) Run(ctx context.Context, emit func(event.Event)) error {
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	m := newSimModel()
	clock := eventclock.New(s.cfg.Now)
	for {
		if ctx.Err() != nil {
			return nil
		}
		now := clock.Now()
		dev := m.step(now, s.load())
		emit(event.NewGPU(&event.GPUSample{Time: now, Available: true, Simulated: true, Devices: []event.GPUDevice{dev}}))
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// The simulated device: an H100-like card serving a model of about 8B
// parameters in bf16.
const (
	simName         = "Simulated H100 80GB (latscope demo)"
	simUUID         = "SIMULATED-latscope-demo-0"
	simProcessName  = "simulated LLM server (latscope demo)"
	simMemTotal     = 80 << 30
	simMemWeights   = 16 << 30 // model weights
	simMemOverhead  = 3 << 30  // CUDA context, activations, graphs
	simKVPool       = simMemTotal*9/10 - simMemWeights - simMemOverhead
	simPowerIdleW   = 75.0
	simPowerLimitW  = 700.0
	simTempIdleC    = 32.0
	simTempRiseC    = 45.0 // above idle, at the power limit
	simClockIdleMHz = 345.0
	simClockMaxMHz  = 1980.0
	simClockMinMHz  = 1100.0 // lowest clock under the power cap
	simBatchFull    = 64.0   // batch size at which the card is fully loaded
	simPowerTau     = 1.5    // seconds: power follows load quickly
	simTempTau      = 8.0    // seconds: the heat sink is slower
	simClockTau     = 0.5
)

// simModel holds the smoothed quantities of the simulated GPU.
type simModel struct {
	last               time.Time
	powerW, tempC, mhz float64
}

func newSimModel() *simModel {
	return &simModel{powerW: simPowerIdleW, tempC: simTempIdleC, mhz: simClockIdleMHz}
}

// step advances the model to now under load l and returns the device reading.
func (m *simModel) step(now time.Time, l SimLoad) event.GPUDevice {
	busy := simClamp01(l.BusyFraction)
	kv := simClamp01(l.KVUsage)
	fill := simClamp01(float64(max(l.BatchSize, 0)) / simBatchFull)

	dt := 0.0
	if !m.last.IsZero() {
		dt = now.Sub(m.last).Seconds()
	}
	m.last = now

	// A busy card with a large batch draws the most; past the limit the
	// driver caps power and lowers the SM clock (sw_power_cap).
	wantPower := simPowerIdleW + busy*(330+330*fill)
	wantClock := simClockMaxMHz
	var reasons []string
	switch {
	case busy < 0.02:
		wantClock = simClockIdleMHz
		reasons = []string{"gpu_idle"}
	case wantPower > simPowerLimitW:
		wantClock = max(simClockMinMHz, simClockMaxMHz*simPowerLimitW/wantPower)
		wantPower = simPowerLimitW
		reasons = []string{"sw_power_cap"}
	}
	m.powerW = simSmooth(m.powerW, wantPower, dt, simPowerTau)
	m.mhz = simSmooth(m.mhz, wantClock, dt, simClockTau)
	m.tempC = simSmooth(m.tempC, simTempIdleC+simTempRiseC*m.powerW/simPowerLimitW, dt, simTempTau)

	memUsed := uint64(simMemWeights + simMemOverhead + kv*simKVPool)
	return event.GPUDevice{
		Index:          0,
		Name:           simName,
		UUID:           simUUID,
		UtilGPU:        uint32(math.Round(busy * 100)),
		UtilMem:        uint32(math.Round(busy * (45 + 40*fill))), // decode is memory-bound
		MemUsed:        memUsed,
		MemTotal:       simMemTotal,
		PowerMilliW:    uint32(math.Round(m.powerW * 1000)),
		PowerLimitMW:   uint32(simPowerLimitW * 1000),
		TempC:          uint32(math.Round(m.tempC)),
		SMClockMHz:     uint32(math.Round(m.mhz)),
		SMClockMaxMHz:  uint32(simClockMaxMHz),
		ThrottleReason: reasons,
		Processes:      []event.GPUProcess{{PID: 0, Name: simProcessName, MemUsed: memUsed - simMemOverhead/2}},
	}
}

// simSmooth moves cur towards target as a first-order lag with time constant
// tau seconds over dt seconds; dt <= 0 leaves cur where it is.
func simSmooth(cur, target, dt, tau float64) float64 {
	if dt <= 0 {
		return cur
	}
	return cur + (target-cur)*(1-math.Exp(-dt/tau))
}

// simClamp01 bounds v to [0, 1]; NaN counts as 0.
func simClamp01(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return min(v, 1)
}
