// Command nvmlcheck runs latscope's GPU collector against the real NVML
// library for a few samples and prints every event it emits as one JSON line
// on stdout, with the probe line and a summary on stderr. It is the check
// for a machine with an NVIDIA GPU; collector/testdata/gpu/nvml_check.sh
// builds and runs it.
//
// Exit status: 0 when every sample came and was available, 1 when NVML was
// unavailable or a sample is missing, 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
)

func main() {
	os.Exit(run())
}

func run() int {
	samples := flag.Int("n", 3, "GPU samples to take")
	interval := flag.Duration("interval", time.Second, "time between samples")
	gpuList := flag.String("gpu", "", "comma-separated GPU indices (empty: all)")
	flag.Parse()
	devices, err := parseIndices(*gpuList)
	if err != nil || *samples < 1 {
		fmt.Fprintf(os.Stderr, "nvmlcheck: bad flags: -n %d, -gpu %q: %v\n", *samples, *gpuList, err)
		return 2
	}

	cfg := collector.GPUConfig{Interval: *interval, Devices: devices}
	ok, line := collector.NewGPU(cfg).Probe()
	fmt.Fprintf(os.Stderr, "probe: available=%v %s\n", ok, line)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(*samples+5)*(*interval)+30*time.Second)
	defer cancel()

	enc := event.NewEncoder(os.Stdout)
	got, available, encodeErrs := 0, 0, 0
	start := time.Now()
	err = collector.NewGPU(cfg).Run(ctx, func(e event.Event) {
		if err := enc.Encode(e); err != nil {
			encodeErrs++
			fmt.Fprintf(os.Stderr, "nvmlcheck: %v\n", err)
		}
		if e.GPU == nil {
			return
		}
		got++
		if e.GPU.Available {
			available++
		}
		if got >= *samples {
			cancel()
		}
	})
	if ferr := enc.Flush(); ferr != nil {
		fmt.Fprintf(os.Stderr, "nvmlcheck: flush: %v\n", ferr)
	}
	fmt.Fprintf(os.Stderr, "summary: %d samples (%d available) in %v, run error: %v, encode errors: %d\n",
		got, available, time.Since(start).Round(time.Millisecond), err, encodeErrs)
	if err != nil || encodeErrs > 0 || available < *samples {
		return 1
	}
	return 0
}

// parseIndices reads "0,2" into [0 2]; "" is no selection.
func parseIndices(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("GPU index %q: %w", f, err)
		}
		out = append(out, i)
	}
	return out, nil
}
