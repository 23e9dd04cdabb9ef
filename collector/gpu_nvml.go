//go:build linux && cgo

package collector

// The NVML reader. Two facts about go-nvml shape this file:
//   - after a failed Init, ANY further NVML call (Shutdown included) can kill
//     the process with exit 127, so a failed Init ends the collector at once;
//   - a function the installed driver lacks kills the process the same way,
//     so newer calls are guarded with Extensions().LookupSymbol.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/eventclock"
)

// GPU samples NVIDIA GPUs through NVML.
type GPU struct {
	cfg      GPUConfig
	lib      nvml.Interface
	procRoot string // where process names are read; tests point it elsewhere
}

// NewGPU returns a GPU collector that uses the system's NVML library
// (libnvidia-ml.so.1, loaded when Run or Probe starts).
func NewGPU(cfg GPUConfig) *GPU {
	return newGPUWithLib(cfg, nvml.New())
}

// newGPUWithLib returns a GPU collector that uses lib, e.g. a go-nvml mock.
func newGPUWithLib(cfg GPUConfig, lib nvml.Interface) *GPU {
	return &GPU{cfg: cfg.withDefaults(), lib: lib, procRoot: "/proc"}
}

// clockEventSymbol is the NVML function behind GetCurrentClocksEventReasons;
// drivers older than R535 lack it.
const clockEventSymbol = "nvmlDeviceGetCurrentClocksEventReasons"

// Run initialises NVML and emits one GPUSample at once and then one per
// interval until ctx ends, then shuts NVML down. When NVML cannot be used (no
// driver, no GPU, a --gpu index that does not exist) it emits one unavailable
// sample and one collector marker instead, and returns nil: the rest of
// latscope keeps working without GPU data.
func (g *GPU) Run(ctx context.Context, emit func(event.Event)) error {
	if ctx.Err() != nil {
		return nil
	}
	if ret := g.lib.Init(); ret != nvml.SUCCESS {
		emitGPUUnavailable(emit, g.cfg.Now(), nvmlInitFailureText(ret))
		return nil // nothing else may be called now, not even Shutdown
	}
	defer g.lib.Shutdown()

	indices, err := g.devices()
	if err != nil {
		emitGPUUnavailable(emit, g.cfg.Now(), err.Error())
		return nil
	}
	readReasons := g.clockReasonsCall()

	ticker := time.NewTicker(g.cfg.Interval)
	defer ticker.Stop()
	clock := eventclock.New(g.cfg.Now)
	for {
		// A tick and the end of ctx can be ready together; the end wins.
		if ctx.Err() != nil {
			return nil
		}
		now := clock.Now()
		devs := make([]event.GPUDevice, 0, len(indices))
		for _, i := range indices {
			devs = append(devs, g.readDevice(i, readReasons))
		}
		emit(event.NewGPU(&event.GPUSample{Time: now, Available: true, Collector: event.GPUCollectorNVML, Devices: devs}))
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Probe checks once whether NVML works and sees the configured GPUs, and
// returns a line for the CLI: "NVML: 2 GPUs, driver 550.54.15" or
// "NVML unavailable: <why>". It is safe to call before Run.
func (g *GPU) Probe() (available bool, reason string) {
	if ret := g.lib.Init(); ret != nvml.SUCCESS {
		return false, nvmlUnavailablePrefix + nvmlInitFailureText(ret)
	}
	defer g.lib.Shutdown()
	indices, err := g.devices()
	if err != nil {
		return false, nvmlUnavailablePrefix + err.Error()
	}
	line := fmt.Sprintf("NVML: %d GPU", len(indices))
	if len(indices) != 1 {
		line += "s"
	}
	if len(g.cfg.Devices) > 0 {
		line += fmt.Sprintf(" selected %v", indices)
	}
	if v, ret := g.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		line += ", driver " + v
	}
	return true, line
}

// devices counts the GPUs and applies the --gpu selection. NVML must be
// initialised.
func (g *GPU) devices() ([]int, error) {
	count, ret := g.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs: %s", nvmlText(ret))
	}
	if count == 0 {
		return nil, errors.New(nvmlNoGPUsReason)
	}
	return selectGPUs(count, g.cfg.Devices)
}

// clockReasonsCall picks the clock-event call the driver has: the current
// name when its symbol exists, else the deprecated "throttle" one, which
// every driver has. NVML must be initialised.
func (g *GPU) clockReasonsCall() func(nvml.Device) (uint64, nvml.Return) {
	if g.lib.Extensions().LookupSymbol(clockEventSymbol) == nil {
		return nvml.Device.GetCurrentClocksEventReasons
	}
	// The deprecated call is the fallback for drivers without the new symbol.
	return nvml.Device.GetCurrentClocksThrottleReasons
}

// readDevice reads one GPU. A field the driver cannot report stays zero and
// is listed in Errors; the others are still read.
func (g *GPU) readDevice(index int, readReasons func(nvml.Device) (uint64, nvml.Return)) event.GPUDevice {
	d := event.GPUDevice{Index: index, Source: event.GPUSourceNVML}
	ok := func(field string, ret nvml.Return) bool {
		if ret == nvml.SUCCESS {
			return true
		}
		d.Errors = append(d.Errors, field+": "+nvmlText(ret))
		return false
	}
	dev, ret := g.lib.DeviceGetHandleByIndex(index)
	if !ok("device", ret) {
		return d
	}
	if v, ret := dev.GetName(); ok("name", ret) {
		d.Name = v
	}
	if v, ret := dev.GetUUID(); ok("uuid", ret) {
		d.UUID = v
	}
	if v, ret := dev.GetUtilizationRates(); ok("utilization", ret) {
		d.UtilGPU, d.UtilMem = v.Gpu, v.Memory
	}
	if v, ret := dev.GetMemoryInfo(); ok("memory", ret) {
		d.MemUsed, d.MemTotal = v.Used, v.Total
	}
	if v, ret := dev.GetPowerUsage(); ok("power", ret) {
		d.PowerMilliW = v
	}
	if v, ret := dev.GetEnforcedPowerLimit(); ok("power_limit", ret) {
		d.PowerLimitMW = v
	}
	if v, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); ok("temperature", ret) {
		d.TempC = v
	}
	if v, ret := dev.GetClockInfo(nvml.CLOCK_SM); ok("sm_clock", ret) {
		d.SMClockMHz = v
	}
	if v, ret := dev.GetMaxClockInfo(nvml.CLOCK_SM); ok("sm_clock_max", ret) {
		d.SMClockMaxMHz = v
	}
	if v, ret := readReasons(dev); ok("throttle", ret) {
		d.ThrottleReason = decodeClockReasons(v)
	}
	if procs, ret := dev.GetComputeRunningProcesses(); ok("processes", ret) {
		for _, p := range procs {
			mem := p.UsedGpuMemory
			if mem == math.MaxUint64 { // NVML_VALUE_NOT_AVAILABLE, e.g. no permission
				mem = 0
			}
			d.Processes = append(d.Processes, event.GPUProcess{PID: p.Pid, Name: gpuProcessName(g.procRoot, p.Pid), MemUsed: mem})
		}
	}
	return d
}

// nvmlInitFailureText explains a failed nvml.Init. It never calls ret.Error(),
// which may call into a half-loaded library.
func nvmlInitFailureText(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "NVML library not found (no NVIDIA driver installed)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to use the NVIDIA driver (check access to /dev/nvidia*)"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "NVML library and kernel driver versions differ (reload the driver or reboot)"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		return "NVML library too old (a function is missing)"
	case nvml.ERROR_GPU_IS_LOST:
		return "a GPU has fallen off the bus"
	case nvml.ERROR_IRQ_ISSUE:
		return "NVIDIA driver interrupt problem"
	}
	return fmt.Sprintf("NVML init failed (error %d)", int(ret))
}

// nvmlText gives a short lower-case text for an NVML error on a field.
// Only used while NVML is initialised, where ret.Error() is safe.
func nvmlText(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED:
		return "not supported"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission"
	case nvml.ERROR_GPU_IS_LOST:
		return "GPU is lost"
	case nvml.ERROR_TIMEOUT:
		return "timeout"
	case nvml.ERROR_INVALID_ARGUMENT:
		return "invalid argument"
	case nvml.ERROR_NOT_FOUND:
		return "not found"
	case nvml.ERROR_UNKNOWN:
		return "unknown error"
	}
	return fmt.Sprintf("%s (%d)", ret.Error(), int(ret))
}
