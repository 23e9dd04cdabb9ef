package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

func ratioOf(v float64) *float64 { return &v }

// exporterGPUs is a cluster's GPUs as the exporter collector reports them:
// two NVIDIA nodes (one with a GPU split into MIG instances and one shared
// by two pods) and an AMD node whose exporter stopped answering.
func exporterGPUs(util uint32) *event.GPUSample {
	const dcgmA, dcgmB, amd = "http://10.0.3.7:9400/metrics", "http://10.0.3.8:9400/metrics", "http://10.0.4.2:5000/metrics"
	h100 := func(index int, util uint32, mem uint64) event.GPUDevice {
		return event.GPUDevice{Index: index, Name: "NVIDIA H100 80GB HBM3", Source: event.GPUSourceDCGM, SourceURL: dcgmA, Host: "gpu-node-a",
			UtilGPU: util, MemUsed: mem << 30, MemTotal: 80 << 30, PowerMilliW: 612_448, TempC: 61, SMClockMHz: 1980}
	}
	busy := h100(0, util, 72)
	busy.GrEngineActive, busy.TensorActive, busy.DRAMActive = ratioOf(0.91), ratioOf(0.41), ratioOf(0.55)
	busy.Pods = []event.GPUPod{{Namespace: "inference", Pod: "vllm-llama-8b-0", Container: "vllm"}}
	idle := h100(1, 0, 0)
	idle.PowerMilliW, idle.TempC, idle.SMClockMHz = 71_203, 29, 345
	idle.GrEngineActive, idle.TensorActive, idle.DRAMActive = ratioOf(0), ratioOf(0), ratioOf(0)

	mig := func(id int, mem uint64, sm float64) event.GPUDevice {
		return event.GPUDevice{Index: 0, Name: "NVIDIA A100-SXM4-80GB", Partition: fmt.Sprintf("MIG 3g.40gb #%d", id), Source: event.GPUSourceDCGM,
			SourceURL: dcgmB, Host: "gpu-node-b", MemUsed: mem << 30, MemTotal: 40 << 30, PowerMilliW: 311_507, PowerLimitMW: 400_000,
			TempC: 55, SMClockMHz: 1410, SMActive: ratioOf(sm), TensorActive: ratioOf(sm / 2), Errors: []string{"utilization: not exported"}}
	}
	shared := event.GPUDevice{Index: 1, Name: "NVIDIA A100-SXM4-80GB", Source: event.GPUSourceDCGM, SourceURL: dcgmB, Host: "gpu-node-b",
		UtilGPU: 88, MemUsed: 60 << 30, MemTotal: 80 << 30, PowerMilliW: 397_214, PowerLimitMW: 400_000, TempC: 78, SMClockMHz: 1275,
		SMActive: ratioOf(0.79), TensorActive: ratioOf(0.47), DRAMActive: ratioOf(0.61), ThrottleReason: []string{"sw_power_cap"},
		Pods: []event.GPUPod{{Namespace: "team-a", Pod: "chat-7b-0"}, {Namespace: "team-b", Pod: "chat-7b-1"}}}
	mi300 := event.GPUDevice{Index: 0, Name: "AMD Instinct MI300X", Source: event.GPUSourceAMD, SourceURL: amd, Host: "mi300-node-1",
		UtilGPU: 94, MemUsed: 178 << 30, MemTotal: 192 << 30, PowerMilliW: 642_000, TempC: 71, SMClockMHz: 2099,
		GrEngineActive: ratioOf(0.96), TensorActive: ratioOf(0.53), Stale: true}
	return &event.GPUSample{Available: true, Collector: event.GPUCollectorExporter,
		Devices: []event.GPUDevice{busy, idle, mig(1, 30, 0.64), mig(2, 8, 0.12), shared, mi300}}
}

// exporterHistory is a minute of the panel's histories for exporterGPUs.
func exporterHistory() *gpuHistory {
	var h gpuHistory
	for k := range 30 {
		g := exporterGPUs(uint32(40 + 2*k))
		g.Time = t0.Add(time.Duration(k) * time.Second)
		h.add(&aggregate.Snapshot{GPU: g})
	}
	return &h
}

// The GPU panel for GPUs read from exporters: each names its source and
// node, a MIG instance or partition leads its name, the SM, tensor and DRAM
// activity follow the clock where there is room, and a GPU whose exporter
// stopped answering says it is stale. The panel keeps the sizes the main
// view gives it: 60 and 100 cells with histories, 40 without.
func TestGoldenGPUExporter(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	g, hist := exporterGPUs(98), exporterHistory()
	for _, c := range []struct {
		histories     bool
		width, height int
	}{{true, 60, 13}, {true, 100, 13}, {false, 40, 8}} {
		name := fmt.Sprintf("histories_%dx%d", c.width, c.height)
		if !c.histories {
			name = fmt.Sprintf("compact_%dx%d", c.width, c.height)
		}
		t.Run(name, func(t *testing.T) {
			golden.RequireEqual(t, []byte(strings.Join(renderGPU(st, g, hist, c.histories, c.width, c.height), "\n")))
		})
	}
}

// At every width the panel may get, no line is wider than the panel, and
// every exporter GPU shows its node and whether it is stale.
func TestGPUPanelExporterFits(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	g, hist := exporterGPUs(98), exporterHistory()
	for width := 30; width <= 100; width++ {
		for _, histories := range []bool{false, true} {
			lines := renderGPU(st, g, hist, histories, width, 13)
			for i, l := range lines {
				if w := visibleWidth(l); w > width {
					t.Fatalf("%d cells, histories %v: line %d is %d cells: %q", width, histories, i, w, l)
				}
			}
			text := strings.Join(lines, "\n")
			if width >= 40 && !strings.Contains(text, "stale") {
				t.Errorf("%d cells, histories %v: the stale GPU does not say so:\n%s", width, histories, text)
			}
			if width >= 60 && histories {
				for _, tag := range []string{"dcgm gpu-node-a", "dcgm gpu-node-b", "amd mi300-node-1"} {
					if !strings.Contains(text, tag) {
						t.Errorf("%d cells: no %q:\n%s", width, tag, text)
					}
				}
			}
		}
	}
}

// The panel's width: an exporter GPU's source tag counts like its name,
// and the panel still takes at most half the screen.
func TestGPUPanelWidthForExporterGPUs(t *testing.T) {
	g := &event.GPUSample{Available: true, Collector: event.GPUCollectorExporter, Devices: []event.GPUDevice{
		{Name: "NVIDIA H100 80GB HBM3", Source: event.GPUSourceDCGM, Host: "gke-prod-gpu-pool-h100-7f9c2d1e-x8kq"}}}
	if got, want := gpuWidth(g, layoutMain(200, 50, 3, 7, 15, 1), 200), gpuLineWidth(len("dcgm gke-prod-gpu-pool-h100-7f9c2d1e-x8kq"), 8); got != want {
		t.Errorf("GPU panel %d cells at 200 columns, want %d: room for the source tag", got, want)
	}
	if got := gpuWidth(g, layoutMain(120, 40, 3, 7, 15, 1), 120); got > 60 {
		t.Errorf("GPU panel %d cells at 120 columns: more than half", got)
	}
}

// The header says where the GPUs come from, and when they are not current.
func TestExporterState(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	dev := func(source string, stale bool) event.GPUDevice { return event.GPUDevice{Source: source, Stale: stale} }
	for _, c := range []struct {
		g    *event.GPUSample
		want string
	}{
		{&event.GPUSample{Available: true, Collector: event.GPUCollectorExporter, Devices: []event.GPUDevice{dev("dcgm", false)}}, "dcgm ✓"},
		{&event.GPUSample{Available: true, Collector: event.GPUCollectorExporter, Devices: []event.GPUDevice{dev("dcgm", false), dev("amd", false)}}, "gpu ✓"},
		{&event.GPUSample{Available: true, Collector: event.GPUCollectorExporter, Devices: []event.GPUDevice{dev("amd", false), dev("amd", true)}}, "amd stale"},
		{&event.GPUSample{Available: false, Collector: event.GPUCollectorExporter, Reason: "GPU metrics unavailable: ..."}, "gpu ✗"},
		{&event.GPUSample{Available: true, Devices: []event.GPUDevice{dev("nvml", false)}}, "nvml ✓"},
	} {
		if got := nvmlState(st, c.g); got != c.want {
			t.Errorf("%+v: %q, want %q", c.g, got, c.want)
		}
	}
}
