package event

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A GPU read from an exporter keeps where it came from through encoding,
// and a local NVML sample encodes as before: the new fields are additive,
// so recordings of either version read with the other.
func TestGPUSourceFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	sm := 0.79
	exporter := NewGPU(&GPUSample{Time: at, Available: true, Collector: GPUCollectorExporter, Devices: []GPUDevice{{
		Index: 1, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-f0e1", UtilGPU: 88, MemUsed: 60 << 30, MemTotal: 80 << 30,
		Source: GPUSourceDCGM, SourceURL: "http://10.0.3.8:9400/metrics", Host: "gpu-node-b", Partition: "MIG 3g.40gb #1",
		Pods: []GPUPod{{Namespace: "team-a", Pod: "chat-7b-0", Container: "vllm"}}, Stale: true, SMActive: &sm,
	}}})
	b, err := Marshal(exporter)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exporter) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got.GPU.Devices[0], exporter.GPU.Devices[0])
	}

	// A sample as an older build wrote it: no source fields at all.
	old := `{"v":1,"kind":"gpu","gpu":{"time":"2026-05-01T12:00:00Z","available":true,"devices":[{"index":0,"name":"NVIDIA H100 80GB HBM3","util_gpu":80,"util_mem":40,"mem_used":1,"mem_total":2,"power_mw":3,"temp_c":4,"sm_clock_mhz":5}]}}`
	e, err := Unmarshal([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if d := e.GPU.Devices[0]; d.Source != "" || d.Host != "" || d.SMActive != nil || e.GPU.Collector != "" {
		t.Errorf("old record decoded with source fields: %+v", d)
	}
	b, err = Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != old {
		t.Errorf("an NVML sample without the new fields encodes differently:\n got %s\nwant %s", b, old)
	}
	for _, field := range []string{"source", "host", "pods", "stale", "sm_active", "collector"} {
		if strings.Contains(string(b), `"`+field+`"`) {
			t.Errorf("empty %s written", field)
		}
	}
}
