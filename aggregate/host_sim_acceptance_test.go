//go:build acceptance

package aggregate_test

// Acceptance tier (go test -tags acceptance -p 1): the client host's own
// pressure against the simulator in real time. Four busy loops keep the
// machine's CPUs busy while the probe measures the simulator: every pause
// the streams share is the host's, none is named the server's, and the
// verdict names the host, not latscope.

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/collector"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/sim"
)

// busyLoops starts n shell busy loops, killed and reaped when the test ends.
func busyLoops(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start a busy loop: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

func TestBusyHostNamesTheHostNotTheServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the host collector reads Linux's /proc")
	}
	if _, err := os.ReadFile("/proc/pressure/cpu"); err != nil {
		t.Skipf("no PSI on this kernel: %v", err)
	}
	if testing.Short() || raceEnabled {
		t.Skip("real time, and latscope's own CPU under half a core: not under -short or -race")
	}
	url := startSim(t, sim.Config{Profile: h100(t), Seed: 1}) // 256 slots: no queue
	busyLoops(t, 4)

	var mu sync.Mutex
	agg := aggregate.New(aggregate.Config{})
	emit := func(ev event.Event) {
		mu.Lock()
		defer mu.Unlock()
		agg.Add(ev)
	}
	// The host collector runs from before the first request to after the
	// last, so every pause has its sample.
	ctx, cancel := context.WithCancel(t.Context())
	hostDone := make(chan error, 1)
	go func() { hostDone <- collector.NewHost(collector.HostConfig{}).Run(ctx, emit) }()
	stopHost := sync.OnceValue(func() error { cancel(); return <-hostDone })
	t.Cleanup(func() { _ = stopHost() })
	time.Sleep(1500 * time.Millisecond)

	r, err := probe.NewRunner(simClient(t, url, nil), probe.LoadConfig{Concurrency: 8, Duration: 10 * time.Second, Drain: 20 * time.Second},
		prompts(t, 64, 200, 5))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(t.Context(), emit); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := stopHost(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	s := agg.Final()
	mu.Unlock()
	if s.Host.Samples == 0 || !s.Host.Saturated() {
		t.Fatalf("host %+v: four busy loops on %d CPUs, want a saturated host", s.Host, runtime.NumCPU())
	}
	for _, m := range s.Markers.Recent {
		if m.Kind == event.MarkerStall && m.Cause != event.StallClientHost {
			t.Errorf("a pause on the busy host named %s: %s", m.Cause, m.Message)
		}
	}
	for cause, total := range s.Markers.Stalls {
		if cause != event.StallClientHost {
			t.Errorf("%d pauses named %s on the busy host", total.Pauses, cause)
		}
	}
	for _, text := range []string{aggregate.StatusLine(s), s.Verdict.VerdictText()} {
		if strings.Contains(text, "LATSCOPE IS THE LIMIT") {
			t.Errorf("latscope named the limit on a busy host: %s", text)
		}
	}
	t.Logf("%s; stalls %v; verdict: %s", s.Host.Line(), s.Markers.Stalls, s.Verdict.VerdictText())
}
