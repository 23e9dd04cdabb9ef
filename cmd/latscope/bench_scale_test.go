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
// streams for 2 s, and checks the shape of what it reports. The figures of
// so small a run are not checked: speed is measured, not asserted.
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
		}
		cmd.SetArgs(args)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := cmd.ExecuteContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("bench scale: %v\n%s", err, out.String())
		}
		if !asJSON {
			for _, s := range []string{"streams", "client", "peak RSS", "RSS@end", "TTFT p99", "ITL p99", "probe/bare", "nothing judged", "all targets met"} {
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
		if len(res.Cases) != 1 || res.Cases[0].Streams != 20 || len(res.Cases[0].Clients) != 2 || !res.Met {
			t.Fatalf("want one 20-stream case with two clients, met:\n%s", out.String())
		}
		for i, want := range []string{bench.ScaleProbe, bench.ScaleBare} {
			c := res.Cases[0].Clients[i]
			if c.Client != want || c.Error != "" || c.PeakRSS == 0 || c.EndRSS == 0 || c.PeakRSS < c.EndRSS {
				t.Errorf("client %d: %+v, want %s with its RSS and no error", i, c, want)
			}
		}
	}
}
