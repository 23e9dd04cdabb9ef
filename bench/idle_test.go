package bench

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestIdleConfigValidate(t *testing.T) {
	t.Parallel()
	ok := IdleConfig{Cases: IdleCases, Duration: time.Second, RateDuration: time.Second, Rate: 0.2, OutputTokens: 8,
		Interval: time.Millisecond, Probe: ExecLauncher("x"), Plain: ExecLauncher("x")}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mutate := range map[string]func(*IdleConfig){
		"unknown case": func(c *IdleConfig) { c.Cases = []string{"c2"} },
		"no case":      func(c *IdleConfig) { c.Cases = nil },
		"short":        func(c *IdleConfig) { c.Duration = time.Millisecond },
		"zero rate":    func(c *IdleConfig) { c.Rate = 0 },
		"NaN rate":     func(c *IdleConfig) { c.Rate = zeroF / zeroF },
		"no tokens":    func(c *IdleConfig) { c.OutputTokens = 0 },
		"no launcher":  func(c *IdleConfig) { c.Plain = nil },
		"bad pace":     func(c *IdleConfig) { c.Interval = -time.Second },
	} {
		c := ok
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

var zeroF float64

// The checks judge each case's own figures: a ratio for c1, a difference
// for the dashboard, absolute figures for the rate.
func TestIdleChecks(t *testing.T) {
	t.Parallel()
	plain := IdleClient{Name: idlePlain, Tokens: 1000, CPUPerTokenUS: 100, CPUPerSecMS: 10}
	met := func(cs []Check) bool {
		for _, c := range cs {
			if !c.Met {
				return false
			}
		}
		return len(cs) > 0
	}
	if !met(idleChecks(IdleC1, []IdleClient{{Name: idleProbe, Tokens: 1000, CPUPerTokenUS: 140}, plain})) {
		t.Error("c1 at 1.4x: missed")
	}
	if met(idleChecks(IdleC1, []IdleClient{{Name: idleProbe, Tokens: 1000, CPUPerTokenUS: 160}, plain})) {
		t.Error("c1 at 1.6x: met")
	}
	if met(idleChecks(IdleC1, []IdleClient{{Name: idleProbe}, {Name: idlePlain}})) {
		t.Error("c1 with no tokens: met")
	}
	probe := IdleClient{Name: idleProbe, Tokens: 1000, CPUPerSecMS: 20}
	if !met(idleChecks(IdleDashboard, []IdleClient{probe, plain, {Name: idleDashboard, Tokens: 1000, CPUPerSecMS: 24}})) {
		t.Error("dashboard adding 4 ms/s: missed")
	}
	if met(idleChecks(IdleDashboard, []IdleClient{probe, plain, {Name: idleDashboard, Tokens: 1000, CPUPerSecMS: 26}})) {
		t.Error("dashboard adding 6 ms/s: met")
	}
	if !met(idleChecks(IdleRate, []IdleClient{{Name: idleProbe, Tokens: 10, CPUPerSecMS: 1.5, RSSMB: 30}, plain})) {
		t.Error("rate at 1.5 ms/s and 30 MB: missed")
	}
	if met(idleChecks(IdleRate, []IdleClient{{Name: idleProbe, Tokens: 10, CPUPerSecMS: 1.5, RSSMB: 41}, plain})) {
		t.Error("rate at 41 MB: met")
	}
	idle := idleChecks(IdleRate, []IdleClient{{Name: idleProbe, CPUPerSecMS: 1, RSSMB: 30}, plain})
	if met(idle) || !strings.Contains(idle[0].Value, "no token was streamed") {
		t.Errorf("rate with no token streamed: %+v, want not met and said why", idle)
	}
}

func TestStatusMB(t *testing.T) {
	t.Parallel()
	status := []byte("Name:\tlatscope\nVmHWM:\t   43000 kB\nVmRSS:\t   40000 kB\n")
	if got := statusMB(status, "VmRSS:"); got != 40000*1024/1e6 {
		t.Fatalf("VmRSS %v MB", got)
	}
	if got := statusMB(status, "VmSwap:"); got != 0 {
		t.Fatalf("missing line gave %v", got)
	}
	if got := statusMB([]byte("VmRSS: lots kB\n"), "VmRSS:"); got != 0 {
		t.Fatalf("a bad figure gave %v", got)
	}
}

func TestReadProcUsage(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	u, err := readProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.cpu <= 0 || u.rssMB <= 0 || u.peakMB < u.rssMB {
		t.Fatalf("own usage %+v", u)
	}
}

// The plain client reads every token event of a stream, and nothing after
// the stream's [DONE].
func TestPlainStreamCountsTokens(t *testing.T) {
	t.Parallel()
	url, stop, err := InProcessServer()(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	n, err := plainStream(context.Background(), url+"/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":16}`)
	if err != nil {
		t.Fatal(err)
	}
	// The role chunk, 16 tokens, the finish and the usage chunks.
	if n != 16+3 {
		t.Fatalf("%d data lines, want 19", n)
	}
	if _, err := plainStream(context.Background(), url+"/nowhere", `{}`); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a 404: %v", err)
	}
}

func TestTailWriterKeepsTheEnd(t *testing.T) {
	t.Parallel()
	var w tailWriter
	w.Write([]byte(strings.Repeat("a", 3000)))
	w.Write([]byte("the end"))
	if s := w.String(); len(s) != 2048 || !strings.HasSuffix(s, "the end") {
		t.Fatalf("kept %d bytes ending %q", len(s), s[len(s)-10:])
	}
}
