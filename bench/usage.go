package bench

import (
	"runtime"
	"time"
)

// usage is a snapshot of this process's counters around one phase.
type usage struct {
	wall    time.Time
	cpu     time.Duration
	cpuErr  error
	alloc   uint64 // runtime.MemStats.TotalAlloc
	mallocs uint64
}

// readUsage takes a snapshot. ReadMemStats stops the world briefly; it is
// called only at phase edges.
func readUsage() usage {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cpu, err := processCPU()
	return usage{wall: time.Now(), cpu: cpu, cpuErr: err, alloc: ms.TotalAlloc, mallocs: ms.Mallocs}
}

// usageDelta is what one phase cost.
type usageDelta struct {
	wall    time.Duration
	cpu     time.Duration
	cpuOK   bool
	alloc   uint64
	mallocs uint64
}

func (u usage) since(before usage) usageDelta {
	return usageDelta{
		wall:    u.wall.Sub(before.wall),
		cpu:     u.cpu - before.cpu,
		cpuOK:   u.cpuErr == nil && before.cpuErr == nil,
		alloc:   u.alloc - before.alloc,
		mallocs: u.mallocs - before.mallocs,
	}
}
