//go:build acceptance

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/bench"
)

// testBinaryLauncher starts the children of `bench scale` as this test
// binary, which TestMain turns into latscope (LATSCOPE_TEST_MAIN).
func testBinaryLauncher(t *testing.T) scaleLauncher {
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no executable path:", err)
	}
	return func(*cobra.Command) (bench.Launcher, error) {
		return func(args ...string) *exec.Cmd {
			c := exec.Command(exe)
			c.Env = append(os.Environ(), "LATSCOPE_TEST_MAIN="+strings.Join(append([]string{"bench"}, args...), "\x1f"))
			return c
		}, nil
	}
}

// TestBenchScaleSmoke runs `bench scale` as it runs for real, children and
// all (the server, the probe as run builds it, the bare client), at 20
// streams for half a second, closed and open loop (the table: open loop
// alone), and checks the shape of what it reports. The figures of so small
// a run are not checked: speed is measured, not asserted. It runs in real
// time, children and all, so it belongs to the acceptance tier: on a busy
// host half a second may finish no request.
func TestBenchScaleSmoke(t *testing.T) {
	t.Parallel()
	for _, asJSON := range []bool{true, false} {
		cmd := newBenchScaleCmdWith(testBinaryLauncher(t))
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		args := []string{"--streams", "20", "--warmup", "0s", "--duration", "500ms",
			"--first-token", "10ms", "--interval", "20ms", "--output-tokens", "4", "--rounds", "1"}
		if asJSON {
			args = append(args, "--json")
		} else {
			args = append(args, "--loads", "open")
		}
		cmd.SetArgs(args)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := cmd.ExecuteContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("bench scale: %v\n%s", err, out.String())
		}
		if !asJSON {
			// 20 streams on a 70 ms schedule: 286 requests/s.
			for _, s := range []string{"streams", "load", "open 286/s", "client", "peak RSS", "RSS@end", "TTFT p99", "ITL p99", "probe/bare", "probe health, open loop: ", "nothing judged", "all targets met"} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("table lacks %q:\n%s", s, out.String())
				}
			}
			continue
		}
		var res bench.ScaleResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out.String())
		}
		if len(res.Cases) != 2 || !res.Met {
			t.Fatalf("want two 20-stream cases, closed and open, met:\n%s", out.String())
		}
		for j, load := range []string{bench.ScaleClosed, bench.ScaleOpen} {
			cs := res.Cases[j]
			if cs.Streams != 20 || cs.Load != load || len(cs.Clients) != 2 || (load == bench.ScaleOpen) != (cs.Rate > 0) {
				t.Fatalf("case %d: %d streams, %s loop at %g/s, %d clients; want 20 streams, %s loop, two clients", j, cs.Streams, cs.Load, cs.Rate, len(cs.Clients), load)
			}
			for i, want := range []string{bench.ScaleProbe, bench.ScaleBare} {
				c := cs.Clients[i]
				if c.Client != want || c.Error != "" || c.Requests == 0 || c.PeakRSS == 0 || c.EndRSS == 0 || c.PeakRSS < c.EndRSS {
					t.Errorf("%s loop, client %d: %+v, want %s with requests, its RSS and no error", load, i, c, want)
				}
			}
		}
	}
}
