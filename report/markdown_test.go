package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

func TestMarkdownHasTheTables(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := Write(&buf, Markdown, defaultSynth(1).load(t)); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"# latscope report: run-1.zst\n",
		"| Session | synthetic-1 |",
		"> **SIMULATED**: run-1.zst measured latscope's built-in simulator, with a simulated GPU, not a real model",
		"| Target | http://10.0.0.1:8000 |",
		"## Requests and throughput\n\n| sent | ok | errors | error rate |",
		"| 600 | 585 | 15 | 2.50% |",
		"## Latency (ms)\n\n| metric | count | mean | stddev | min | p50 | p90 | p95 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|---|---|---|---|\n| ttft | 585 |",
		"| itl | 18135 |",
		"## Client stages (ms, measured)",
		"| first_token | 585 |",
		"## TTFT breakdown (ms, 585 requests)",
		"| queue | server | 585 |",
		"| network_out | estimated |",
		"| TTFT (band total) |",
		"## Errors by kind\n\n| outcome | count | share of sent |\n|---|---|---|\n| http_status | 15 | 2.50% |",
		"## Errors by HTTP status",
		"| 15 | http_status | 503 Service Unavailable: upstream overloaded |",
		"## Server (vllm, http://10.0.0.1:8000/metrics): 61 samples",
		"| queue depth (waiting) |",
		"## GPU (latest sample) - SIMULATED",
		"| 0 | Simulated H100 | 90% | 20.0 / 80.0 GiB | 400 W | 60 C | 1980 MHz |",
		"| stall | stall-detector | front-end block: 4 streams paused together, longest gap ~100 ms |",
		// The error bursts aggregate derived, as the dashboard lists them.
		"| errors | aggregate | error burst: 503 ×3 in 10s (3.0% of 99 finished requests) |",
		"Counts: errors 3, note 1, stall 1 (front end block 1)",
		"## Insights\n\n- queue wait is",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "|") && !strings.HasSuffix(line, "|") {
			t.Errorf("line %d is a broken table row: %q", i+1, line)
		}
	}
}

func TestMarkdownEscapesRecordedText(t *testing.T) {
	t.Parallel()
	s := defaultSynth(2)
	s.duration = 5 * time.Second
	s.header = func(h *event.Session) { h.Model = "m|x <b>bold</b>\nsecond line" }
	rec := s.load(t)
	var buf bytes.Buffer
	if err := Write(&buf, Markdown, rec); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	// The newline was escaped as the recording was read (event.Safe).
	if want := `| Model | m\|x \<b>bold\</b>\\nsecond line |`; !strings.Contains(md, want) {
		t.Errorf("model row not escaped; want %q in\n%s", want, md)
	}
	if regexp.MustCompile(`(^|[^\\])<[a-z/]`).MatchString(md) {
		t.Error("raw HTML from the recording in the Markdown")
	}
}

func TestMarkdownComparison(t *testing.T) {
	t.Parallel()
	slow := defaultSynth(14)
	slow.queueMean = 90 * time.Millisecond
	var buf bytes.Buffer
	if err := WriteComparison(&buf, Markdown, compare(t, defaultSynth(13).load(t), slow.load(t))); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"# latscope comparison: run-13.zst vs run-14.zst",
		"## Runs\n\n|  | base | other |",
		"## Significant changes\n\n- latency ttft mean: ",
		"- breakdown queue mean: ",
		"## Changes (other − base)\n\n| section | metric | stat | unit | base | other | change | change % | p | significant | windows |",
		"| breakdown | prefill | mean | ms |",
		"Rule: Welch's t-test",
		"Windows: 5s long; 11 whole windows in base, 11 in other.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
}

func TestOnlySimulatedRunsSaySo(t *testing.T) {
	t.Parallel()
	real := defaultSynth(3)
	real.simulated, real.duration = false, 5*time.Second
	rec := real.load(t)
	for _, f := range []Format{Markdown, HTML} {
		var buf bytes.Buffer
		if err := Write(&buf, f, rec); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "SIMULATED") {
			t.Errorf("%s report of a real run says SIMULATED", f)
		}
	}
	gpuOnly := defaultSynth(4)
	gpuOnly.duration = 5 * time.Second
	gpuOnly.header = func(h *event.Session) { h.Simulated = false }
	if note := gpuOnly.load(t).SimulatedNote(); !strings.HasPrefix(note, "SIMULATED GPU: ") {
		t.Errorf("a real server with a simulated GPU: %q", note)
	}
}

// The session's objectives are judged by aggregate's one evaluation; ones
// it refuses are said to be refused, not judged.
func TestMarkdownJudgesTheSessionsObjectives(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ slo, want string }{
		{"ttft.p99<10s,errors.rate<1%,tpot.p99<1ms", "| ttft.p99<10s |"},
		{"ttft.p99=10s", "The session's objectives are refused, so none is judged: invalid SLO"},
	} {
		s := defaultSynth(3)
		s.header = func(h *event.Session) { h.Load.SLO = tc.slo }
		var buf bytes.Buffer
		if err := Write(&buf, Markdown, s.load(t)); err != nil {
			t.Fatal(err)
		}
		md := buf.String()
		if !strings.Contains(md, "## Objectives (whole run)") || !strings.Contains(md, tc.want) {
			t.Errorf("%s: markdown lacks the objectives or %q", tc.slo, tc.want)
		}
		if strings.HasPrefix(tc.slo, "ttft.p99<") {
			for _, row := range []string{"| ttft.p99<10s | ", " | met |", "| errors.rate<1% | 2.50% | missed |"} {
				if !strings.Contains(md, row) {
					t.Errorf("markdown lacks %q:\n%s", row, md[strings.Index(md, "## Objectives"):][:400])
				}
			}
		}
	}
}
