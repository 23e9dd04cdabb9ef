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

// TestBenchIdleSmoke runs `bench idle` as it runs for real, every case,
// children and all (latscope run headless and on a terminal, the plain
// client), for a second or two each, and checks the shape of its report:
// every client of every case streamed and was measured. The figures of so
// short a run are not checked, and so neither is the exit code beyond
// "met" or "missed".
func TestBenchIdleSmoke(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no executable path:", err)
	}
	as := func(prefix ...string) bench.Launcher {
		return func(args ...string) *exec.Cmd {
			c := exec.Command(exe)
			c.Env = append(os.Environ(), "LATSCOPE_TEST_MAIN="+strings.Join(append(prefix, args...), "\x1f"))
			return c
		}
	}
	cmd := newBenchIdleCmdWith(func(*cobra.Command) (bench.Launcher, bench.Launcher, error) {
		return as(), as("bench", "idle-client"), nil
	})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--warmup", "0s", "--duration", "2s", "--rate-duration", "2s", "--rate", "2", "--output-tokens", "16", "--json"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	if err != nil && exitCode(io.Discard, err, nil) != exitFailure {
		t.Fatalf("bench idle: %v\n%s", err, out.String())
	}
	var res bench.IdleResult
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		t.Fatalf("not JSON: %v\n%s", jerr, out.String())
	}
	if (err == nil) != res.Met {
		t.Errorf("exit %v with met %v", err, res.Met)
	}
	if len(res.Cases) != 3 {
		t.Fatalf("%d cases, want c1, dashboard and rate:\n%s", len(res.Cases), out.String())
	}
	for _, c := range res.Cases {
		want := 2
		if c.Name == bench.IdleDashboard {
			want = 3
		}
		if len(c.Clients) != want || len(c.Checks) == 0 {
			t.Errorf("case %s: %d clients, %d checks", c.Name, len(c.Clients), len(c.Checks))
		}
		for _, cl := range c.Clients {
			if cl.Tokens <= 0 || cl.CPUms < 0 || cl.RSSMB <= 0 {
				t.Errorf("case %s, %s: %+v", c.Name, cl.Name, cl)
			}
		}
	}
}
