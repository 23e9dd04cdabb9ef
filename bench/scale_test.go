package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func TestScaleConfigValidate(t *testing.T) {
	t.Parallel()
	ok := ScaleConfig{
		Streams: []int{10}, Duration: time.Second, FirstToken: time.Millisecond, Interval: time.Millisecond, OutputTokens: 4,
		StartServer: func(context.Context, string) (string, func() error, error) { return "", nil, nil },
		RunClient:   func(context.Context, ScaleSpec) (ScaleRun, error) { return ScaleRun{}, nil },
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tt := range []struct {
		change func(*ScaleConfig)
		want   string
	}{
		{func(c *ScaleConfig) { c.Streams = nil }, "need at least one"},
		{func(c *ScaleConfig) { c.Streams = []int{0} }, "streams must be between"},
		{func(c *ScaleConfig) { c.Streams = []int{maxScaleStreams + 1} }, "streams must be between"},
		{func(c *ScaleConfig) { c.Duration = 0 }, "duration"},
		{func(c *ScaleConfig) { c.Warmup = -time.Second }, "warmup"},
		{func(c *ScaleConfig) { c.Rounds = -1 }, "rounds"},
		{func(c *ScaleConfig) { c.Interval = 0 }, "token interval"},
		{func(c *ScaleConfig) { c.FirstToken = -1 }, "first token"},
		{func(c *ScaleConfig) { c.OutputTokens = 1 }, "output tokens"},
		{func(c *ScaleConfig) { c.RunClient = nil }, "no server or client"},
		{func(c *ScaleConfig) { c.Loads = []string{ScaleClosed, "sideways"} }, `load "sideways"`},
	} {
		c := ok
		tt.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
	}
}

func TestFrameLogRoundTrip(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := NewFrameLogWriter(&b)
	in := []FrameLog{
		{ID: "a b", OK: true, Start: 1_000, Frames: []int64{1_500, 2_000}},
		{ID: "", OK: false, Start: -5},
		{ID: "c", Cut: true, Start: 7, Frames: []int64{9}},
	}
	for _, l := range in {
		w.Write(l)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var out []FrameLog
	if err := ReadFrameLogs(&b, func(l FrameLog) error { out = append(out, l); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].ID != "a_b" || !out[0].OK || out[0].Frames[1] != 2_000 || out[1].ID != "-" || out[1].OK || out[1].Cut || out[1].Start != -5 ||
		!out[2].Cut || out[2].OK || out[2].Frames[0] != 9 {
		t.Errorf("read back %+v", out)
	}
	for _, bad := range []string{"x 1\n", "x 2 5\n", "x 1 y\n", "x 1 5 z\n"} {
		if err := ReadFrameLogs(strings.NewReader(bad), func(FrameLog) error { return nil }); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestRunScaleScores drives RunScale with a server and clients that write
// frame logs of known times, and checks the errors, ratios and verdicts
// computed from them.
func TestRunScaleScores(t *testing.T) {
	t.Parallel()
	const ms = int64(time.Millisecond)
	// Every client sees each frame late by its own delay; the probe's are
	// 30 µs, the bare client's 20 µs (ratio 1.5x), and the probe's process
	// is too big at 10,000 streams.
	late := map[string]int64{ScaleProbe: 30_000, ScaleBare: 20_000}
	rss := map[string]uint64{ScaleProbe: 2_000_000_000, ScaleBare: 100_000_000}
	var truth string
	cfg := ScaleConfig{
		Streams: []int{1000, 10000}, Duration: time.Second, FirstToken: time.Millisecond, Interval: time.Millisecond, OutputTokens: 3,
		Rounds: 2, Dir: t.TempDir(),
		StartServer: func(_ context.Context, path string) (string, func() error, error) {
			truth = path
			return "http://server", func() error { return nil }, nil
		},
		RunClient: func(_ context.Context, spec ScaleSpec) (ScaleRun, error) {
			server, client := openLogs(t, truth, spec.LogPath)
			for i := range 4 {
				start := int64(i) * 10 * ms // request 3 lies wholly past the window's end
				frames := []int64{start + ms, start + 2*ms, start + 3*ms}
				server.Write(FrameLog{ID: "r" + string(rune('0'+i)), OK: true, Start: start, Frames: frames})
				seen := make([]int64, len(frames))
				for j, f := range frames {
					seen[j] = f + late[spec.Client] + int64(j)*1_000 // gaps 1 µs longer each
				}
				client.Write(FrameLog{ID: "r" + string(rune('0'+i)), OK: true, Start: start, Frames: seen})
			}
			client.Write(FrameLog{ID: "failed", Start: 5 * ms})
			client.Write(FrameLog{ID: "cut", Cut: true, Start: 6 * ms, Frames: []int64{7 * ms}})
			client.Write(FrameLog{ID: "late-cut", Cut: true, Start: 26 * ms}) // begun after the window: not counted
			closeLogs(t, server, client)
			return ScaleRun{Client: spec.Client, Streams: spec.Streams, WindowStart: 0, WindowEnd: 25 * ms,
				PeakRSS: rss[spec.Client], EndRSS: rss[spec.Client] / 2, CPU: time.Millisecond, FileLimit: 20000}, nil
		},
	}
	res, err := RunScale(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != 2 || res.Met {
		t.Fatalf("cases %d, met %v; want 2, missed", len(res.Cases), res.Met)
	}
	c := res.Cases[0]
	p := c.Clients[0]
	// Two rounds, pooled.
	if p.Client != ScaleProbe || p.Requests != 6 || p.Failed != 2 || p.Cut != 2 || p.TTFT.N != 6 || p.ITL.N != 12 || p.EventsPerSec != 2*10/0.05 {
		t.Errorf("probe row %+v: want 6 requests scored, 2 failed, 2 cut, 6 TTFT and 12 ITL errors, 400 events/s", p)
	}
	if p.TTFT.P50Us != 30 || p.ITL.P50Us != 1 {
		t.Errorf("probe TTFT p50 %v, ITL p50 %v; want 30 and 1 µs", p.TTFT.P50Us, p.ITL.P50Us)
	}
	if c.Ratio == nil || c.Ratio.TTFTP50.String() != "1.50x" || c.Ratio.ITLP50.String() != "1.00x" {
		t.Errorf("ratio %+v, want TTFT 1.50x and ITL 1.00x", c.Ratio)
	}
	if len(c.Checks) != 4 || c.Checks[0].Met || !c.Checks[2].Met {
		t.Errorf("1000-stream checks %+v: want TTFT missed, ITL met", c.Checks)
	}
	if chk := res.Cases[1].Checks; len(chk) != 3 || chk[0].Met || !strings.Contains(chk[0].Value, "2000 MB") || !chk[1].Met || !chk[2].Met {
		t.Errorf("10000-stream checks %+v: want RSS missed at 2000 MB, events/s and CPU per event met", chk)
	}
	var out bytes.Buffer
	if err := WriteScaleTable(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"peak RSS", "RSS@end", "TTFT p50", "ITL p99", "probe/bare", "1.50x", "MISSED", "PASS", "2000.0", "limit in the client processes: 20000"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

// TestRunScaleOpenLoopRate: each load model is its own case, and the open
// loop's phases get the rate that keeps the streams in flight on the
// server's schedule (1,000 streams over 50 ms + 31 × 100 ms: 317.5/s).
func TestRunScaleOpenLoopRate(t *testing.T) {
	t.Parallel()
	var rates []float64
	cfg := ScaleConfig{
		Streams: []int{1000}, Loads: []string{ScaleClosed, ScaleOpen}, Duration: time.Second,
		FirstToken: 50 * time.Millisecond, Interval: 100 * time.Millisecond, OutputTokens: 32, Dir: t.TempDir(),
		StartServer: func(context.Context, string) (string, func() error, error) {
			return "http://server", func() error { return nil }, nil
		},
		RunClient: func(_ context.Context, spec ScaleSpec) (ScaleRun, error) {
			rates = append(rates, spec.Rate)
			return ScaleRun{}, errors.New("not run")
		},
	}
	res, err := RunScale(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != 2 || res.Cases[0].Load != ScaleClosed || res.Cases[1].Load != ScaleOpen {
		t.Fatalf("cases %+v: want closed, then open", res.Cases)
	}
	want := 1000 / 3.15
	if len(rates) != 4 || rates[0] != 0 || rates[1] != 0 || math.Abs(rates[2]-want) > 1e-9 || rates[3] != rates[2] || res.Cases[1].Rate != rates[2] {
		t.Errorf("phase rates %v, open case %g/s: want 0, 0, then %.1f/s for both clients", rates, res.Cases[1].Rate, want)
	}
	var table strings.Builder
	if err := WriteScaleTable(&table, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "open 317/s") || !strings.Contains(table.String(), "1000 streams, open loop, probe: MISSED: not run") {
		t.Errorf("table lacks the open loop's rate or its phase's error:\n%s", table.String())
	}
}

func TestRunScaleReportsAFailedPhase(t *testing.T) {
	t.Parallel()
	cfg := ScaleConfig{
		Streams: []int{1000}, Duration: time.Second, Interval: time.Millisecond, OutputTokens: 3, Dir: t.TempDir(),
		StartServer: func(context.Context, string) (string, func() error, error) {
			return "http://server", func() error { return nil }, nil
		},
		RunClient: func(context.Context, ScaleSpec) (ScaleRun, error) {
			return ScaleRun{}, errors.New("limit too low")
		},
	}
	res, err := RunScale(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Met || res.Cases[0].Clients[0].Error != "limit too low" || res.Cases[0].Ratio != nil {
		t.Errorf("result %+v: want the phase's error, no ratio, missed", res)
	}
}

func openLogs(t *testing.T, paths ...string) (*FrameLogWriter, *FrameLogWriter) {
	t.Helper()
	var ws []*FrameLogWriter
	for _, p := range paths {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		ws = append(ws, NewFrameLogWriter(f))
	}
	return ws[0], ws[1]
}

func closeLogs(t *testing.T, ws ...*FrameLogWriter) {
	t.Helper()
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPacedFastServer checks the schedule's lower bound (no frame before
// it is due, however slow the host) and that the truth arrives before the
// client's stream ends.
func TestPacedFastServer(t *testing.T) {
	t.Parallel()
	type stream struct {
		id      string
		arrived time.Time
		flushed []time.Time
	}
	got := make(chan stream, 1)
	fs := FastServer{TokensPerWrite: 1, FirstToken: 5 * time.Millisecond, Interval: 3 * time.Millisecond,
		OnStream: func(id string, arrived time.Time, flushed []time.Time) { got <- stream{id, arrived, flushed} }}
	if err := fs.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	tr := NewBareClient(srv.URL, "m", nil).Stream(context.Background(), StreamRequest{ID: "paced", OutputTokens: 4})
	if tr.Err != nil || tr.Frames() != 4 {
		t.Fatalf("frames %d, err %v; want 4", tr.Frames(), tr.Err)
	}
	var s stream
	select {
	case s = <-got:
	default:
		t.Fatal("no truth recorded by the time the stream ended")
	}
	if s.id != "paced" || len(s.flushed) != 4 {
		t.Fatalf("truth %+v", s)
	}
	for i, f := range s.flushed {
		if due := fs.FirstToken + time.Duration(i)*fs.Interval; f.Sub(s.arrived) < due {
			t.Errorf("frame %d flushed %s after arrival, before its due %s", i, f.Sub(s.arrived), due)
		}
	}
	for _, bad := range []FastServer{{TokensPerWrite: 0}, {TokensPerWrite: 1, Interval: -1}, {TokensPerWrite: 1, FirstToken: 2 * time.Hour}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
}

// TestRunScaleCaseSaysTheFileLimitIsTooLow asks for more streams than any
// open-file limit allows: the child stops before it starts, saying why.
func TestRunScaleCaseSaysTheFileLimitIsTooLow(t *testing.T) {
	t.Parallel()
	spec := ScaleSpec{Client: ScaleBare, Streams: 1 << 30, Duration: time.Second, LogPath: t.TempDir() + "/log"}
	_, err := RunScaleCase(context.Background(), spec, func(context.Context, ScaleSpec, time.Duration, Clock, *FrameLogWriter) (*ProbeHealth, error) {
		t.Error("the driver ran")
		return nil, nil
	})
	if lim, _ := RaiseFileLimit(); lim == 0 {
		t.Skip("no open-file limit here")
	}
	if err == nil || !strings.Contains(err.Error(), "open files and the limit is") || !strings.Contains(err.Error(), "ulimit -Hn") {
		t.Errorf("err = %v, want the open-file limit named", err)
	}
}

func TestLastLine(t *testing.T) {
	t.Parallel()
	var l lastLine
	for _, s := range []string{"first\n", "sec", "ond\n\n  \n"} {
		l.Write([]byte(s))
	}
	if got := l.String(); got != "second" {
		t.Errorf("last line %q, want second", got)
	}
	l.Write([]byte("partial"))
	if got := l.String(); got != "partial" {
		t.Errorf("last line %q, want partial", got)
	}
}

// TestWriteScaleTableProbeHealth: the table names, per load model, the
// fewest streams at which the probe said it was the limit, and otherwise
// that it kept pace.
func TestWriteScaleTableProbeHealth(t *testing.T) {
	t.Parallel()
	probeAt := func(n int, load, state string) ScaleCase {
		return ScaleCase{Streams: n, Load: load, Clients: []ScaleClient{
			{Client: ScaleProbe, Probe: &ProbeHealth{State: state, Reason: fmt.Sprintf("%s at %d", state, n)}},
			{Client: ScaleBare},
		}}
	}
	r := ScaleResult{Cases: []ScaleCase{
		probeAt(1000, ScaleClosed, "kept_pace"), probeAt(10000, ScaleClosed, "held"), probeAt(5000, ScaleClosed, "held"),
		probeAt(1000, ScaleOpen, "kept_pace"), probeAt(5000, ScaleOpen, "paused"),
	}}
	var b strings.Builder
	if err := WriteScaleTable(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"probe health, closed loop: the probe was the limit at 5000 streams (the fewest where it said so): held at 5000",
		"probe health, open loop: never the limit; at 5000 streams (the fewest) its goroutines ran late over a few shared pauses: paused at 5000",
		"kept_pace", "held",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	r.Cases = r.Cases[:1]
	b.Reset()
	if err := WriteScaleTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "probe health, closed loop: the probe kept pace at every count"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	if strings.Contains(b.String(), "open loop:") {
		t.Errorf("the table speaks of an open loop it did not run:\n%s", b.String())
	}
}
