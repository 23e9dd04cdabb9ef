package collector

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/latscope/latscope/event"
)

// gpuFixture reads a page from testdata/gpu_exporter (see its README for
// where each comes from).
func gpuFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "gpu_exporter", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ratio(v float64) *float64 { return &v }

const mib = 1 << 20

func TestParseGPUMetricsFixtures(t *testing.T) {
	t.Parallel()
	h100 := func(index int, uuid string) event.GPUDevice {
		return event.GPUDevice{Index: index, Name: "NVIDIA H100 80GB HBM3", UUID: uuid, Source: event.GPUSourceDCGM, Host: "gpu-node-a"}
	}
	busy := h100(0, "GPU-5c2b9a1e-7f3d-4e21-9a8b-0c1d2e3f4a5b")
	busy.UtilGPU, busy.UtilMem, busy.MemUsed, busy.MemTotal = 97, 58, 73421*mib, (73421+7613+525)*mib
	busy.PowerMilliW, busy.TempC, busy.SMClockMHz = 612448, 61, 1980
	busy.Pods = []event.GPUPod{{Namespace: "inference", Pod: "vllm-llama-8b-6d9f7c7b9-x2kqp", Container: "vllm"}}
	busy.GrEngineActive, busy.TensorActive, busy.DRAMActive = ratio(0.912345), ratio(0.413207), ratio(0.552019)
	idle := h100(1, "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b")
	idle.MemUsed, idle.MemTotal = 1*mib, (1+81033+525)*mib
	idle.PowerMilliW, idle.TempC, idle.SMClockMHz = 71203, 29, 345
	idle.GrEngineActive, idle.TensorActive, idle.DRAMActive = ratio(0), ratio(0), ratio(0.000012)

	mi300 := func(index int) event.GPUDevice {
		return event.GPUDevice{Index: index, Name: "AMD Instinct MI300X", Source: event.GPUSourceAMD, Host: "mi300-node-1",
			MemTotal: 196592 * mib, SMClockMaxMHz: 2100}
	}
	amdBusy := mi300(0)
	amdBusy.UtilGPU, amdBusy.UtilMem, amdBusy.MemUsed = 94, 37, 183012*mib
	// Package power (MI3xx) before power usage; the junction temperature;
	// the mean of the eight dies' graphics clocks (16792/8 = 2099).
	amdBusy.PowerMilliW, amdBusy.TempC, amdBusy.SMClockMHz = 642000, 71, 2099
	amdBusy.Pods = []event.GPUPod{{Namespace: "inference", Pod: "sglang-deepseek-0", Container: "sglang"}}
	amdBusy.GrEngineActive, amdBusy.TensorActive = ratio(0.963), ratio(0.528) // not gpu_prof_sm_active: VALU busy is no SM activity
	amdIdle := mi300(1)
	amdIdle.MemUsed, amdIdle.PowerMilliW, amdIdle.TempC, amdIdle.SMClockMHz = 283*mib, 141000, 39, 132
	amdIdle.GrEngineActive, amdIdle.TensorActive = ratio(0), ratio(0)

	mi210 := event.GPUDevice{Index: 0, Name: "AMD Instinct MI210", Source: event.GPUSourceAMD, Host: "mi210-ws",
		UtilGPU: 76, UtilMem: 22, MemUsed: 40221 * mib, MemTotal: 65520 * mib,
		PowerMilliW: 191000, TempC: 64, SMClockMHz: 1700, SMClockMaxMHz: 1700} // power usage before the average; the edge temperature

	readme := event.GPUDevice{Index: 0, UUID: "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52", Source: event.GPUSourceDCGM, SMClockMHz: 139,
		Errors: []string{"utilization: not exported", "power: not exported", "temperature: not supported", "memory used: not exported", "memory total: not exported"}}

	for _, tc := range []struct {
		file string
		want []event.GPUDevice
	}{
		{"dcgm_default.prom", []event.GPUDevice{busy, idle}},
		{"amd_mi300x.prom", []event.GPUDevice{amdBusy, amdIdle}},
		{"amd_mi210.prom", []event.GPUDevice{mi210}},
		{"dcgm_readme.prom", []event.GPUDevice{readme}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseGPUMetrics(strings.NewReader(gpuFixture(t, tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("devices:\n got %s\nwant %s", showGPUs(got), showGPUs(tc.want))
			}
		})
	}
}

// MIG instances are devices of their own; a GPU that pods share
// (dcgm-exporter's virtual GPU mode) is one device with every pod, and
// its figures are the GPU's, not one pod's share.
func TestParseGPUMetricsMIGAndSharing(t *testing.T) {
	t.Parallel()
	devs, err := ParseGPUMetrics(strings.NewReader(gpuFixture(t, "dcgm_mig_shared.prom")))
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 3 {
		t.Fatalf("%d devices, want 2 MIG instances and 1 shared GPU: %s", len(devs), showGPUs(devs))
	}
	for i, want := range []string{"MIG 3g.40gb #1", "MIG 3g.40gb #2", ""} {
		if devs[i].Partition != want || devs[i].Host != "gpu-node-b" {
			t.Errorf("device %d: partition %q host %q, want %q on gpu-node-b (the newer lower-case hostname label)", i, devs[i].Partition, devs[i].Host, want)
		}
	}
	mig := devs[0]
	if mig.MemUsed != 30720*mib || mig.MemTotal != 40447*mib || !reflect.DeepEqual(mig.Errors, []string{"utilization: not exported"}) {
		t.Errorf("MIG instance: mem %d/%d errors %q, want FB_TOTAL's total and no utilization (DCGM has none per instance)", mig.MemUsed, mig.MemTotal, mig.Errors)
	}
	shared := devs[2]
	wantPods := []event.GPUPod{{Namespace: "team-a", Pod: "chat-7b-0", Container: "vllm"}, {Namespace: "team-b", Pod: "chat-7b-1", Container: "vllm"}}
	if !reflect.DeepEqual(shared.Pods, wantPods) {
		t.Errorf("shared GPU's pods %+v, want %+v", shared.Pods, wantPods)
	}
	if shared.UtilGPU != 88 || shared.MemUsed != 61234*mib || shared.MemTotal != 81920*mib {
		t.Errorf("shared GPU util %d%% mem %d MiB of %d, want the device's 88%% and 61234 of 81920 MiB, not a pod's share",
			shared.UtilGPU, shared.MemUsed/mib, shared.MemTotal/mib)
	}
	if shared.PowerLimitMW != 400_000 || shared.SMClockMaxMHz != 1410 || shared.SMActive == nil || *shared.SMActive != 0.790356 {
		t.Errorf("shared GPU: power limit %d mW, max clock %d, SM active %v", shared.PowerLimitMW, shared.SMClockMaxMHz, shared.SMActive)
	}
	// 36 = 0x4 | 0x20, NVML's clock-event bits.
	if !reflect.DeepEqual(shared.ThrottleReason, []string{"sw_power_cap", "sw_thermal"}) {
		t.Errorf("throttle %q, want sw_power_cap and sw_thermal", shared.ThrottleReason)
	}
}

// AMD's compute partitions are devices of their own, named by their mode.
func TestParseGPUMetricsAMDPartitions(t *testing.T) {
	t.Parallel()
	page := ""
	for _, part := range []string{"0", "1"} {
		labels := `card_model="AMD Instinct MI300X",gpu_compute_partition_type="cpx",gpu_id="` + part + `",gpu_partition_id="` + part + `",hostname="n1"`
		page += "gpu_gfx_activity{" + labels + "} 50\ngpu_used_vram{" + labels + "} 1024\n"
	}
	devs, err := ParseGPUMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[0].Partition != "CPX #0" || devs[1].Partition != "CPX #1" || devs[1].MemUsed != 1024*mib {
		t.Fatalf("devices %s, want CPX #0 and #1", showGPUs(devs))
	}
}

func TestParseGPUMetricsRefusesOtherPages(t *testing.T) {
	t.Parallel()
	for name, page := range map[string]string{
		"a server's own page":    promFixture(t, "vllm_v1_a.prom"),
		"an empty page":          "",
		"only comments":          "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
		"a series naming no GPU": "DCGM_FI_DEV_GPU_UTIL{Hostname=\"a\"} 5\n",
	} {
		if devs, err := ParseGPUMetrics(strings.NewReader(page)); !errors.Is(err, ErrNoGPUMetrics) {
			t.Errorf("%s: devices %s, error %v; want ErrNoGPUMetrics", name, showGPUs(devs), err)
		}
	}
	if _, err := ParseGPUMetrics(strings.NewReader("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5")); err == nil || errors.Is(err, ErrNoGPUMetrics) {
		t.Errorf("a page cut before its last newline: error %v, want a parse error", err)
	}
}

// Values no GPU can have read as missing, never as a figure: DCGM's blanks,
// negatives, and numbers past what the device's fields hold.
func TestParseGPUMetricsImpossibleValues(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"-5", "2147483632", "140737488355328", "9223372036854775794", "1e300", "NaN", "+Inf"} {
		page := "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 50\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} " + v + "\nDCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} " + v + "\n"
		devs, err := ParseGPUMetrics(strings.NewReader(page))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		d := devs[0]
		if d.UtilGPU != 50 || d.PowerMilliW != 0 || d.SMActive != nil {
			t.Errorf("power and SM activity %s: read as %d mW and %v, want 0 and none", v, d.PowerMilliW, d.SMActive)
		}
		if !strings.Contains(strings.Join(d.Errors, ";"), "power: not") {
			t.Errorf("power %s: errors %q, want power named", v, d.Errors)
		}
	}
	// Percentages and ratios past their range are capped, not wrapped.
	devs, err := ParseGPUMetrics(strings.NewReader("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 250\nDCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} 1.5\n"))
	if err != nil || devs[0].UtilGPU != 100 || *devs[0].SMActive != 1 {
		t.Errorf("util 250%%, SM active 1.5: got %s, %v", showGPUs(devs), err)
	}
}

func TestSplitGPUMetricsURLs(t *testing.T) {
	t.Parallel()
	got := SplitGPUMetricsURLs([]string{"http://a:9400/metrics, http://b:9400/metrics", "", "dns+http://c:9400/metrics,"})
	want := []string{"http://a:9400/metrics", "http://b:9400/metrics", "dns+http://c:9400/metrics"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzGPUMetrics feeds any text as an exporter page: it parses or is
// refused, never panics, and every device it returns holds figures a GPU
// can have.
func FuzzGPUMetrics(f *testing.F) {
	for _, name := range []string{"dcgm_default.prom", "dcgm_mig_shared.prom", "dcgm_readme.prom", "amd_mi300x.prom", "amd_mi210.prom"} {
		f.Add(gpuFixture(f, name))
	}
	f.Add("DCGM_FI_DEV_GPU_UTIL{gpu=\"x\",UUID=\"\"} 1e400\n")
	f.Add("gpu_clock{gpu_id=\"0\",clock_type=\"system\"} -1\ngpu_clock{gpu_id=\"0\",clock_type=\"system\"} 5\n")
	f.Fuzz(func(t *testing.T, page string) {
		devs, err := ParseGPUMetrics(strings.NewReader(page))
		if err != nil {
			if devs != nil {
				t.Fatalf("devices %v with error %v", devs, err)
			}
			return
		}
		if len(devs) == 0 {
			t.Fatal("no devices and no error")
		}
		for _, d := range devs {
			if d.UtilGPU > 100 || d.UtilMem > 100 || len(d.Pods) > maxGPUPods {
				t.Fatalf("impossible device %+v", d)
			}
			if d.Source != event.GPUSourceDCGM && d.Source != event.GPUSourceAMD {
				t.Fatalf("device without its source: %+v", d)
			}
			for _, r := range []*float64{d.GrEngineActive, d.SMActive, d.TensorActive, d.DRAMActive} {
				if r != nil && !(*r >= 0 && *r <= 1) {
					t.Fatalf("activity %v outside 0..1: %+v", *r, d)
				}
			}
			if _, err := event.Marshal(event.NewGPU(&event.GPUSample{Available: true, Devices: []event.GPUDevice{d}})); err != nil {
				t.Fatalf("device does not encode: %v", err)
			}
		}
	})
}

// showGPUs prints devices with their activity ratios, which %+v shows as
// pointers.
func showGPUs(devs []event.GPUDevice) string {
	act := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	var b strings.Builder
	for _, d := range devs {
		plain := d
		plain.GrEngineActive, plain.SMActive, plain.TensorActive, plain.DRAMActive = nil, nil, nil, nil
		fmt.Fprintf(&b, "\n  %+v gr=%s sm=%s tensor=%s dram=%s", plain, act(d.GrEngineActive), act(d.SMActive), act(d.TensorActive), act(d.DRAMActive))
	}
	return b.String()
}
