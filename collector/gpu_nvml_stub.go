//go:build !(linux && cgo)

package collector

// The stand-in for builds where go-nvml cannot compile (it needs cgo and
// Linux): the collector reports that it is unavailable and why.

import (
	"context"
	"runtime"

	"github.com/latscope/latscope/event"
)

// GPU would sample NVIDIA GPUs through NVML; in this build it can only say
// that NVML is not compiled in.
type GPU struct {
	cfg GPUConfig
}

// NewGPU returns a GPU collector that reports NVML as unavailable.
func NewGPU(cfg GPUConfig) *GPU {
	return &GPU{cfg: cfg.withDefaults()}
}

// Run emits one unavailable sample and one collector marker, and returns nil.
func (g *GPU) Run(ctx context.Context, emit func(event.Event)) error {
	if ctx.Err() != nil {
		return nil
	}
	emitGPUUnavailable(emit, g.cfg.Now(), nvmlStubReason())
	return nil
}

// Probe returns false and the line the CLI prints.
func (g *GPU) Probe() (available bool, reason string) {
	return false, nvmlUnavailablePrefix + nvmlStubReason()
}

// nvmlStubReason says why this build has no NVML.
func nvmlStubReason() string {
	if runtime.GOOS != "linux" {
		return "NVML is supported on Linux only (this build is for " + runtime.GOOS + ")"
	}
	return "built without cgo (NVML needs cgo)"
}
