//go:build linux && cgo

package collector

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/latscope/latscope/event"
)

var gpuTestTime = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

// gpuTestConfig samples fast with a fixed clock.
func gpuTestConfig(devices ...int) GPUConfig {
	return GPUConfig{Interval: time.Millisecond, Devices: devices, Now: func() time.Time { return gpuTestTime }}
}

// newGPUTestServer returns a mock machine with n H100s: go-nvml's DGX A100
// mock, its devices renamed and resized, and its count cut to n. The mock
// fills in name, UUID and memory total only; the metric funcs are left nil
// (they panic if called) for the caller to set.
func newGPUTestServer(n int) *dgxa100.Server {
	srv := dgxa100.New()
	for _, d := range srv.Devices {
		d := d.(*dgxa100.Device)
		d.Name = "NVIDIA H100 80GB HBM3"
		d.MemoryInfo = nvml.Memory{Total: 80 << 30}
	}
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return n, nvml.SUCCESS }
	return srv
}

// fakeGPUProcs writes a /proc-like tree with the given command names.
func fakeGPUProcs(t *testing.T, names map[uint32]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, name := range names {
		dir := filepath.Join(root, strconv.FormatUint(uint64(pid), 10))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// loadGPUDevice gives device i of srv a full set of readings: utilization
// 80+i %, power 500+i W, and so on, and two processes.
func loadGPUDevice(srv *dgxa100.Server, i int) *dgxa100.Device {
	d := srv.Devices[i].(*dgxa100.Device)
	u := uint32(i)
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 80 + u, Memory: 40 + u}, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 80 << 30, Used: 70<<30 + uint64(i), Free: 10<<30 - uint64(i)}, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 500_000 + u*1000, nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 700_000, nvml.SUCCESS }
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return 60 + u, nvml.SUCCESS
	}
	clock := func(max uint32) func(nvml.ClockType) (uint32, nvml.Return) {
		return func(c nvml.ClockType) (uint32, nvml.Return) {
			if c != nvml.CLOCK_SM {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return max, nvml.SUCCESS
		}
	}
	d.GetClockInfoFunc = clock(1755 + u)
	d.GetMaxClockInfoFunc = clock(1980)
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		return nvml.ClocksEventReasonSwPowerCap | nvml.ClocksEventReasonSwThermalSlowdown, nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 4242, UsedGpuMemory: 60 << 30},
			{Pid: 7, UsedGpuMemory: math.MaxUint64}, // NVML_VALUE_NOT_AVAILABLE
		}, nvml.SUCCESS
	}
	return d
}

func TestGPURunReadsEveryField(t *testing.T) {
	srv := newGPUTestServer(2)
	loadGPUDevice(srv, 0)
	d1 := loadGPUDevice(srv, 1)
	d1.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	var shutdowns atomic.Int32
	srv.ShutdownFunc = func() nvml.Return { shutdowns.Add(1); return nvml.SUCCESS }

	g := newGPUWithLib(gpuTestConfig(), srv)
	g.procRoot = fakeGPUProcs(t, map[uint32]string{4242: "vllm"})
	samples, markers := splitGPUEvents(t, collectGPU(t, g, 2))
	if len(samples) != 2 || len(markers) != 0 {
		t.Fatalf("got %d samples, %d markers; want 2 and 0", len(samples), len(markers))
	}
	if shutdowns.Load() != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdowns.Load())
	}
	for _, s := range samples {
		if !s.Available || s.Simulated || s.Reason != "" || s.Collector != event.GPUCollectorNVML || !s.Time.Equal(gpuTestTime) {
			t.Errorf("sample header = %+v, want available, real, at %v", s, gpuTestTime)
		}
	}
	procs := []event.GPUProcess{{PID: 4242, Name: "vllm", MemUsed: 60 << 30}, {PID: 7, MemUsed: 0}}
	want := []event.GPUDevice{
		{
			Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: srv.Devices[0].(*dgxa100.Device).UUID,
			UtilGPU: 80, UtilMem: 40, MemUsed: 70 << 30, MemTotal: 80 << 30,
			PowerMilliW: 500_000, PowerLimitMW: 700_000, TempC: 60, SMClockMHz: 1755, SMClockMaxMHz: 1980,
			ThrottleReason: []string{"sw_power_cap", "sw_thermal"}, Processes: procs, Source: event.GPUSourceNVML,
		},
		{
			Index: 1, Name: "NVIDIA H100 80GB HBM3", UUID: d1.UUID,
			UtilGPU: 81, UtilMem: 41, MemUsed: 70<<30 + 1, MemTotal: 80 << 30,
			PowerMilliW: 0, PowerLimitMW: 700_000, TempC: 61, SMClockMHz: 1756, SMClockMaxMHz: 1980,
			ThrottleReason: []string{"sw_power_cap", "sw_thermal"}, Processes: procs,
			Errors: []string{"power: not supported"}, Source: event.GPUSourceNVML,
		},
	}
	if got := samples[1].Devices; !reflect.DeepEqual(got, want) {
		t.Errorf("devices:\n got %+v\nwant %+v", got, want)
	}
	if got := d1.GetCurrentClocksThrottleReasonsCalls(); len(got) != 0 {
		t.Errorf("legacy throttle call used %d times although the new symbol exists", len(got))
	}
}

// TestGPUClockReasonsLegacyPath: a driver without
// nvmlDeviceGetCurrentClocksEventReasons must get the old call only (the new
// func is left nil, so calling it would panic).
func TestGPUClockReasonsLegacyPath(t *testing.T) {
	srv := newGPUTestServer(1)
	d := loadGPUDevice(srv, 0)
	d.GetCurrentClocksEventReasonsFunc = nil
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
		return nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, nvml.SUCCESS
	}
	var looked []string
	srv.LookupSymbolFunc = func(name string) error {
		looked = append(looked, name)
		return errors.New("undefined symbol: " + name)
	}
	samples, _ := splitGPUEvents(t, collectGPU(t, newGPUWithLib(gpuTestConfig(), srv), 1))
	if got, want := samples[0].Devices[0].ThrottleReason, []string{"hw_slowdown", "hw_power_brake"}; !reflect.DeepEqual(got, want) {
		t.Errorf("throttle = %q, want %q", got, want)
	}
	if !reflect.DeepEqual(looked, []string{clockEventSymbol}) {
		t.Errorf("looked up %q, want just %q", looked, clockEventSymbol)
	}
}

// TestGPUInitFailure: after a failed Init nothing else may be called. The
// mock has only InitFunc set, so any other call would panic.
func TestGPUInitFailure(t *testing.T) {
	tests := []struct {
		ret  nvml.Return
		want string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "NVML library not found (no NVIDIA driver installed)"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "NVIDIA driver not loaded"},
		{nvml.ERROR_NO_PERMISSION, "no permission to use the NVIDIA driver"},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, "versions differ"},
		{nvml.ERROR_UNKNOWN, "NVML init failed (error 999)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			lib := &mock.Interface{InitFunc: func() nvml.Return { return tt.ret }}
			checkGPUUnavailable(t, collectGPU(t, newGPUWithLib(gpuTestConfig(), lib), 1), tt.want)
			if n := len(lib.InitCalls()); n != 1 {
				t.Errorf("Init called %d times, want 1", n)
			}

			ok, line := newGPUWithLib(gpuTestConfig(), lib).Probe()
			if ok || line != nvmlUnavailablePrefix+nvmlInitFailureText(tt.ret) || !strings.Contains(line, tt.want) {
				t.Errorf("Probe() = %v, %q; want false and %q", ok, line, tt.want)
			}
		})
	}
}

func TestGPUDeviceSelection(t *testing.T) {
	srv := newGPUTestServer(3)
	loadGPUDevice(srv, 2) // devices 0 and 1 have no metric funcs: reading them would panic
	samples, _ := splitGPUEvents(t, collectGPU(t, newGPUWithLib(gpuTestConfig(2), srv), 1))
	if got := samples[0].Devices; len(got) != 1 || got[0].Index != 2 || got[0].UtilGPU != 82 {
		t.Errorf("--gpu 2 gave devices %+v, want only index 2", got)
	}
}

func TestGPUMissingDevice(t *testing.T) {
	srv := newGPUTestServer(2) // metric funcs nil: nothing may be read
	var shutdowns atomic.Int32
	srv.ShutdownFunc = func() nvml.Return { shutdowns.Add(1); return nvml.SUCCESS }
	g := newGPUWithLib(gpuTestConfig(0, 2), srv)
	checkGPUUnavailable(t, collectGPU(t, g, 1), "GPU index 2 not found: this machine has 2 GPUs (indices 0-1)")
	if shutdowns.Load() != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdowns.Load())
	}
	ok, line := g.Probe()
	if ok || !strings.Contains(line, "GPU index 2 not found") {
		t.Errorf("Probe() = %v, %q; want the missing index", ok, line)
	}
}

func TestGPUNoDevices(t *testing.T) {
	srv := newGPUTestServer(0)
	checkGPUUnavailable(t, collectGPU(t, newGPUWithLib(gpuTestConfig(), srv), 1), nvmlNoGPUsReason)
	if ok, line := newGPUWithLib(gpuTestConfig(), srv).Probe(); ok || line != nvmlUnavailablePrefix+nvmlNoGPUsReason {
		t.Errorf("Probe() = %v, %q; want false, no GPUs", ok, line)
	}
}

func TestGPUCountFails(t *testing.T) {
	srv := newGPUTestServer(1)
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
	checkGPUUnavailable(t, collectGPU(t, newGPUWithLib(gpuTestConfig(), srv), 1), "count GPUs: no permission")
}

// TestGPUDeviceErrors: a lost GPU and a device that refuses everything still
// leave the other GPU's readings in the sample.
func TestGPUDeviceErrors(t *testing.T) {
	srv := newGPUTestServer(3)
	loadGPUDevice(srv, 0)
	srv.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 1 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return srv.Devices[i], nvml.SUCCESS
	}
	no := nvml.ERROR_NOT_SUPPORTED
	d2 := srv.Devices[2].(*dgxa100.Device)
	d2.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NO_PERMISSION }
	d2.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_TIMEOUT }
	d2.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, no }
	d2.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, no }
	d2.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, no }
	d2.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, no }
	d2.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, no }
	d2.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, no }
	d2.GetMaxClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, no }
	d2.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, no }
	d2.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }

	samples, _ := splitGPUEvents(t, collectGPU(t, newGPUWithLib(gpuTestConfig(), srv), 1))
	devs := samples[0].Devices
	if len(devs) != 3 || devs[0].UtilGPU != 80 || len(devs[0].Errors) != 0 {
		t.Fatalf("devices = %+v, want 3 with device 0 intact", devs)
	}
	if want := (event.GPUDevice{Index: 1, Errors: []string{"device: GPU is lost"}, Source: event.GPUSourceNVML}); !reflect.DeepEqual(devs[1], want) {
		t.Errorf("lost device = %+v, want %+v", devs[1], want)
	}
	wantErrs := []string{
		"name: no permission", "uuid: timeout", "utilization: not supported", "memory: not supported",
		"power: not supported", "power_limit: not supported", "temperature: not supported",
		"sm_clock: not supported", "sm_clock_max: not supported", "throttle: not supported", "processes: unknown error",
	}
	if want := (event.GPUDevice{Index: 2, Errors: wantErrs, Source: event.GPUSourceNVML}); !reflect.DeepEqual(devs[2], want) {
		t.Errorf("refusing device = %+v, want %+v", devs[2], want)
	}
}

// TestGPURunStopsOnCancel: Run keeps sampling until ctx ends, then returns
// and shuts NVML down once.
func TestGPURunStopsOnCancel(t *testing.T) {
	srv := newGPUTestServer(1)
	loadGPUDevice(srv, 0)
	var shutdowns atomic.Int32
	srv.ShutdownFunc = func() nvml.Return { shutdowns.Add(1); return nvml.SUCCESS }
	ctx, cancel := context.WithCancel(context.Background())
	samples := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() {
		done <- newGPUWithLib(gpuTestConfig(), srv).Run(ctx, func(event.Event) {
			select {
			case samples <- struct{}{}:
			default:
			}
		})
	}()
	for i := range 3 { // several ticks, so the loop really loops
		select {
		case <-samples:
		case <-time.After(20 * time.Second):
			t.Fatalf("sample %d never came", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if shutdowns.Load() != 1 || len(srv.InitCalls()) != 1 {
		t.Errorf("Init %d times, Shutdown %d times; want 1 and 1", len(srv.InitCalls()), shutdowns.Load())
	}
}

func TestGPUProbeWithMock(t *testing.T) {
	var shutdowns atomic.Int32
	srv := newGPUTestServer(2)
	srv.ShutdownFunc = func() nvml.Return { shutdowns.Add(1); return nvml.SUCCESS }
	tests := []struct {
		devices []int
		want    string
	}{
		{nil, "NVML: 2 GPUs, driver 550.54.15"},
		{[]int{1}, "NVML: 1 GPU selected [1], driver 550.54.15"},
	}
	for _, tt := range tests {
		ok, line := newGPUWithLib(gpuTestConfig(tt.devices...), srv).Probe()
		if !ok || line != tt.want {
			t.Errorf("Probe(--gpu %v) = %v, %q; want true, %q", tt.devices, ok, line, tt.want)
		}
	}
	if shutdowns.Load() != int32(len(tests)) {
		t.Errorf("Shutdown called %d times, want %d", shutdowns.Load(), len(tests))
	}
}

// TestGPUProbeRealLibrary loads the system's NVML for real. Without a driver
// Init fails with "library not found" and nothing else is called (anything
// else would kill the test binary with exit 127).
func TestGPUProbeRealLibrary(t *testing.T) {
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		t.Skip("this machine has an NVIDIA GPU; nvml_check.sh covers it")
	}
	ok, line := NewGPU(GPUConfig{}).Probe()
	if want := nvmlUnavailablePrefix + "NVML library not found (no NVIDIA driver installed)"; ok || line != want {
		t.Errorf("Probe() = %v, %q; want false, %q", ok, line, want)
	}
}

// TestGPUClockReasonBits checks the decoding table against go-nvml's constants.
func TestGPUClockReasonBits(t *testing.T) {
	want := map[string]uint64{
		"gpu_idle":                    nvml.ClocksEventReasonGpuIdle,
		"applications_clocks_setting": nvml.ClocksEventReasonApplicationsClocksSetting,
		"sw_power_cap":                nvml.ClocksEventReasonSwPowerCap,
		"hw_slowdown":                 nvml.ClocksThrottleReasonHwSlowdown,
		"sync_boost":                  nvml.ClocksEventReasonSyncBoost,
		"sw_thermal":                  nvml.ClocksEventReasonSwThermalSlowdown,
		"hw_thermal":                  nvml.ClocksThrottleReasonHwThermalSlowdown,
		"hw_power_brake":              nvml.ClocksThrottleReasonHwPowerBrakeSlowdown,
		"display_clock_setting":       nvml.ClocksEventReasonDisplayClockSetting,
		// Newer than the go-nvml this builds with (v0.13.0-1, the last
		// whose header compiles without deprecation warnings): nvml.h's
		// values since CUDA 12.
		"board_limit": 0x200,
		"reliability": 0x400,
	}
	var all uint64
	for _, r := range clockReasons {
		if r.bit != want[r.name] {
			t.Errorf("%s = %#x, nvml says %#x", r.name, r.bit, want[r.name])
		}
		all |= r.bit
	}
	// This go-nvml's "all" predates the last two bits.
	if wantAll := uint64(nvml.ClocksEventReasonAll) | 0x200 | 0x400; len(clockReasons) != len(want) || all != wantAll {
		t.Errorf("table covers %#x in %d entries, want %#x", all, len(clockReasons), wantAll)
	}
}
