package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/session"
)

// recordedAgent serves one agent's whole stream: its session header, then
// one successful request per TTFT, then the end.
func recordedAgent(t *testing.T, name string, ttfts []time.Duration) (*httptest.Server, []event.Event) {
	t.Helper()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	evs := []event.Event{event.NewSession(&event.Session{Time: at, Name: name, Target: "http://x", Load: event.Load{Mode: "closed"}})}
	for i, d := range ttfts {
		start := at.Add(time.Duration(i) * 100 * time.Millisecond)
		evs = append(evs, event.NewRequest(&event.Request{ID: fmt.Sprintf("%s-%d", name, i), Start: start, Intended: start,
			Outcome: event.OutcomeOK, TTFT: d, E2E: d + 50*time.Millisecond, OutputTokens: 1}))
	}
	return serveAgentStream(t, "run-"+strconv.Quote(name), evs), evs // quoted: a valid header value whatever the name
}

// serveAgentStream serves evs as an agent's whole stream, then its end.
func serveAgentStream(t *testing.T, stream string, evs []event.Event) *httptest.Server {
	t.Helper()
	var body strings.Builder
	for i, ev := range evs {
		b, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&body, "id: %d\ndata: %s\n\n", i+1, b)
	}
	body.WriteString("event: end\ndata: {}\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set(agent.StreamHeader, stream)
		_, _ = w.Write([]byte(body.String()))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// ttftSteps returns n durations from lo in steps of step milliseconds.
func ttftSteps(n int, lo, step float64) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration((lo + float64(i)*step) * float64(time.Millisecond))
	}
	return out
}

// attach --json's fleet is the agents' requests merged: its percentiles
// are those of one aggregator fed every agent's events, not the average of
// the agents' own, and its counts are their sum.
func TestAttachJSONMergesTheFleetExactly(t *testing.T) {
	t.Parallel()
	fast, fastEvs := recordedAgent(t, "fast", ttftSteps(200, 10, 0.5)) // 10-110 ms
	slow, slowEvs := recordedAgent(t, "slow", ttftSteps(50, 400, 4))   // 400-600 ms
	mid, midEvs := recordedAgent(t, "mid", ttftSteps(100, 100, 1))     // 100-200 ms
	out, stderr, err := execute(t, "attach", fast.URL, slow.URL, mid.URL, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var got struct {
		Fleet  aggregate.Summary
		Agents map[string]aggregate.Summary
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if len(got.Agents) != 3 {
		t.Fatalf("agents %v, want fast, slow and mid", keys(got.Agents))
	}
	union := aggregate.New(aggregate.Config{})
	for _, evs := range [][]event.Event{fastEvs, slowEvs, midEvs} {
		for _, ev := range evs {
			if ev.Request != nil {
				union.Add(ev)
			}
		}
	}
	want := union.Summary().TTFT
	f := got.Fleet.TTFT
	if f.Count != 350 || f.Count != want.Count || f.P50 != want.P50 || f.P90 != want.P90 || f.P99 != want.P99 || f.Max != want.Max {
		t.Errorf("fleet TTFT %+v, want the merged requests' %+v", f, want)
	}
	if got.Fleet.Requests.Sent != 350 {
		t.Errorf("fleet requests %d, want 350", got.Fleet.Requests.Sent)
	}
	var meanP99 float64
	for _, s := range got.Agents {
		meanP99 += s.TTFT.P99 / 3
	}
	if f.P99 == meanP99 {
		t.Errorf("fleet TTFT p99 %v is the agents' p99s averaged", f.P99)
	}
	t.Logf("fleet TTFT p50 %.1f p99 %.1f ms; the agents' p99s averaged: %.1f ms", f.P50, f.P99, meanP99)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// skewedAgent is a real agent whose clock is off by skew; it has served a
// whole session: requests at the same true times as its peers', dated by
// its own clock. It measures from region-<name>.
func skewedAgent(t *testing.T, name string, skew time.Duration, trueStart time.Time, n int) string {
	t.Helper()
	clock := func() time.Time { return time.Now().Add(skew) }
	srv, url, _ := servedAgent(t, agent.Config{Now: clock, Identity: agent.Identity{Name: name, Region: "region-" + name}},
		name, "open", trueStart.Add(skew), n) // the agent's reading of the true start
	srv.End()
	return url
}

// servedAgent serves a real agent with cfg (on a loopback port, with the
// tests' token) and publishes a session begun at at with n successful
// requests 10 ms apart. stop ends it as a crash would (idempotent; also
// at the test's end).
func servedAgent(t *testing.T, cfg agent.Config, name, mode string, at time.Time, n int) (srv *agent.Server, url string, stop func()) {
	t.Helper()
	cfg.Listen = agent.ListenConfig{Addr: "127.0.0.1:0", Token: "tok-0123456789abcdef"}
	srv, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-served }) }
	t.Cleanup(stop)
	evs := []event.Event{event.NewSession(&event.Session{Time: at, Name: name, Target: "http://x", Load: event.Load{Mode: mode}})}
	for i := range n {
		start := at.Add(time.Duration(i) * 10 * time.Millisecond)
		evs = append(evs, event.NewRequest(&event.Request{ID: fmt.Sprintf("%s-%d", name, i), Start: start, Intended: start,
			Outcome: event.OutcomeOK, TTFT: 20 * time.Millisecond, E2E: 50 * time.Millisecond, OutputTokens: 1}))
	}
	for _, ev := range evs {
		if err := srv.Publish(ev); err != nil {
			t.Fatal(err)
		}
	}
	return srv, "http://" + ln.Addr().String(), stop
}

// Agents whose clocks are off by +250 ms, 0 and -100 ms: attach estimates
// each offset (within half the round trip of its best ping) and aligns the
// fleet's timeline by it, so requests sent at the same true times span
// what they spanned, not 350 ms more.
func TestAttachAlignsTheFleetByEachAgentsClock(t *testing.T) {
	t.Parallel()
	trueStart := time.Now().Truncate(time.Millisecond)
	skews := map[string]time.Duration{"ahead": 250 * time.Millisecond, "exact": 0, "behind": -100 * time.Millisecond}
	var urls []string
	for name, skew := range skews {
		urls = append(urls, skewedAgent(t, name, skew, trueStart, 100))
	}
	out, stderr, err := execute(t, append([]string{"attach", "--no-tui", "--json", "--token", "tok-0123456789abcdef"}, urls...)...)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var got struct {
		Fleet struct {
			Start, End time.Time
		}
		Connections map[string]session.AgentConnection
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	worst := 0.0
	for name, skew := range skews {
		c := got.Connections[name]
		if c.ClockOffsetMS == nil {
			t.Fatalf("agent %s: no clock offset (%q)\n%s", name, c.ClockError, stderr)
		}
		if c.Region != "region-"+name || c.ClockEstimates != 1 || c.ClockError != "" {
			t.Errorf("agent %s: region %q, %d clock estimates (%q): want its region and one estimate, for its one connection", name, c.Region, c.ClockEstimates, c.ClockError)
		}
		miss := math.Abs(*c.ClockOffsetMS - ms(skew))
		t.Logf("agent %s: clock %+v ms, estimated %+.3f ms (bound %.3f ms)", name, ms(skew), *c.ClockOffsetMS, *c.ClockBoundMS)
		if miss > *c.ClockBoundMS+0.001 {
			t.Errorf("agent %s: offset %.3f ms, true %v: off by %.3f ms, beyond its bound %.3f ms", name, *c.ClockOffsetMS, skew, miss, *c.ClockBoundMS)
		}
		worst = max(worst, *c.ClockBoundMS)
	}
	for _, name := range []string{"ahead", "behind"} {
		if !strings.Contains(stderr, name+": warning: its clock is") {
			t.Errorf("no warning about %s's clock:\n%s", name, stderr)
		}
	}
	// Aligned: the fleet starts at the true start and spans the true
	// 99 x 10 ms + 50 ms, each within the estimates' bound.
	slack := time.Duration((2*worst + 0.001) * float64(time.Millisecond))
	if d := got.Fleet.Start.Sub(trueStart).Abs(); d > slack {
		t.Errorf("the fleet starts %v from the true start (slack %v): not aligned", d, slack)
	}
	if span, want := got.Fleet.End.Sub(got.Fleet.Start), 99*10*time.Millisecond+50*time.Millisecond; (span - want).Abs() > slack {
		t.Errorf("the fleet spans %v, want %v (slack %v): the agents' clocks were not aligned", span, want, slack)
	}
}

// recordedRequests reads back the requests an agent recorded, and its
// session header.
func recordedRequests(t *testing.T, path string) (*event.Session, []event.Event) {
	t.Helper()
	r, err := recorder.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []event.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return r.Header(), out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ev.Request != nil {
			out = append(out, ev)
		}
	}
}

// Attached to three real agents (each `latscope agent --record` against
// the simulator), the fleet counts the sum of the agents' requests, and
// its TTFT percentiles are those of the union of the requests the agents
// recorded, read back from their files: exact, not the agents' percentiles
// averaged. Each agent's region comes through, and is in its recording's
// session header. Counts are finite and the
// attach ends on the agents' own end: nothing depends on the host's pace.
func TestAttachFleetIsTheUnionOfTheAgentsRecordings(t *testing.T) {
	t.Parallel()
	url := serveTinySim(t)
	dir := t.TempDir()
	names := []string{"east", "west", "north"}
	var urls []string
	agents := map[string]*runningAgent{}
	for i, name := range names {
		a := startAgent(t, "--url", url, "-n", fmt.Sprint(10+5*i), "-c", "2", "--prompt-tokens", "32", "--output-tokens", "8",
			"--no-gpu", "--linger", "30s", "--quiet", "--name", name, "--region", "region-"+name, "--record", filepath.Join(dir, name+".lsr"))
		agents[name] = a
		urls = append(urls, "http://"+a.addr)
	}
	out, stderr, err := execute(t, append([]string{"attach", "--no-tui", "--json"}, urls...)...)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var got struct {
		Fleet       aggregate.Summary
		Agents      map[string]aggregate.Summary
		Connections map[string]session.AgentConnection
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	union := aggregate.New(aggregate.Config{})
	var agentsSent, recorded int64
	for i, name := range names {
		a := agents[name]
		a.wait() // its recording is closed once its session ended
		if a.err != nil {
			t.Fatalf("agent %s: %v\n%s", name, a.err, a.stderr.String())
		}
		header, reqs := recordedRequests(t, filepath.Join(dir, name+".lsr"))
		if header.Name != name || header.Region != "region-"+name {
			t.Errorf("agent %s recorded the session %q of region %q, want its name and region", name, header.Name, header.Region)
		}
		if i == 0 {
			union.Add(event.NewSession(header)) // the agents' TTFT basis, as the fleet takes it
		}
		for _, ev := range reqs {
			union.Add(ev)
		}
		recorded += int64(len(reqs))
		s, ok := got.Agents[name]
		if !ok {
			t.Fatalf("no agent %s in %v", name, keys(got.Agents))
		}
		if s.Requests.Sent != int64(10+5*i) || s.Requests.Sent != int64(len(reqs)) {
			t.Errorf("agent %s: attach counts %d requests, its recording %d, want %d", name, s.Requests.Sent, len(reqs), 10+5*i)
		}
		agentsSent += s.Requests.Sent
		if c := got.Connections[name]; c.Region != "region-"+name || c.ClockOffsetMS == nil {
			t.Errorf("agent %s: connection %+v, want its region and clock offset", name, c)
		}
	}
	want := union.Summary()
	f := got.Fleet
	if f.Requests.Sent != agentsSent || f.Requests.Sent != recorded || f.TTFT.Count != want.TTFT.Count {
		t.Errorf("the fleet counts %d requests (%d with a TTFT); the agents %d, their recordings %d (%d)",
			f.Requests.Sent, f.TTFT.Count, agentsSent, recorded, want.TTFT.Count)
	}
	if f.TTFT.P50 != want.TTFT.P50 || f.TTFT.P99 != want.TTFT.P99 || f.E2E.P50 != want.E2E.P50 {
		t.Errorf("fleet TTFT p50/p99 %.3f/%.3f ms, E2E p50 %.3f; the recordings' union %.3f/%.3f, %.3f",
			f.TTFT.P50, f.TTFT.P99, f.E2E.P50, want.TTFT.P50, want.TTFT.P99, want.E2E.P50)
	}
	t.Logf("fleet: %d requests, TTFT p50 %.3f ms p99 %.3f ms (the recordings' union: %.3f, %.3f)", f.Requests.Sent, f.TTFT.P50, f.TTFT.P99, want.TTFT.P50, want.TTFT.P99)
}

// steppedClockAgent is an agent whose clock is stepped between its two
// connections: +250 ms on the first, which ends after 5 of 10 requests,
// -100 ms on the second, which sends the rest and the end. Its requests go
// out 10 ms apart from trueStart, dated by its clock of the moment.
func steppedClockAgent(t *testing.T, trueStart time.Time) *httptest.Server {
	t.Helper()
	skews := []time.Duration{250 * time.Millisecond, -100 * time.Millisecond}
	var conns atomic.Int64 // /events connections so far
	skew := func() time.Duration { return skews[min(max(conns.Load()-1, 0), 1)] }
	frame := func(id int, ev event.Event) string {
		b, err := event.Marshal(ev)
		if err != nil {
			t.Error(err)
		}
		return fmt.Sprintf("id: %d\ndata: %s\n\n", id, b)
	}
	request := func(i int, skew time.Duration) event.Event {
		at := trueStart.Add(time.Duration(i)*10*time.Millisecond + skew)
		return event.NewRequest(&event.Request{ID: fmt.Sprintf("r%d", i), Start: at, Intended: at, Outcome: event.OutcomeOK,
			TTFT: 20 * time.Millisecond, E2E: 50 * time.Millisecond, OutputTokens: 1})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/clock", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"unix_nano": %d, "name": "stepped", "region": "eu-west"}`, time.Now().Add(skew()).UnixNano())
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set(agent.StreamHeader, "run-1")
		var body strings.Builder
		switch {
		case n == 1:
			body.WriteString(frame(1, event.NewSession(&event.Session{Time: trueStart.Add(skews[0]), Name: "stepped", Target: "http://x", Load: event.Load{Mode: "open"}})))
			for i := range 5 {
				body.WriteString(frame(2+i, request(i, skews[0])))
			}
			// The connection ends here, without the end: attach reconnects.
		case r.Header.Get("Last-Event-ID") == "6":
			for i := 5; i < 10; i++ {
				body.WriteString(frame(2+i, request(i, skews[1])))
			}
			body.WriteString("event: end\ndata: {}\n\n")
		default:
			t.Errorf("connection %d resumes after %q, want 6", n, r.Header.Get("Last-Event-ID"))
		}
		_, _ = io.WriteString(w, body.String())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// After an agent reconnects, attach estimates its clock again, before the
// new connection's events, says the new offset, shows it in the JSON with
// the agent's region, and moves those events by it: the fleet's requests
// line up with the true times although the agent's clock jumped by 350 ms
// between its connections.
func TestAttachEstimatesTheClockAgainAfterAReconnection(t *testing.T) {
	t.Parallel()
	trueStart := time.Now().Truncate(time.Millisecond)
	srv := steppedClockAgent(t, trueStart)
	out, stderr, err := execute(t, "attach", "--no-tui", "--json", srv.URL)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var got struct {
		Fleet       struct{ Start, End time.Time }
		Connections map[string]session.AgentConnection
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	c := got.Connections["stepped"]
	if c.Connections != 2 || c.ClockEstimates != 2 || c.ClockOffsetMS == nil || c.Region != "eu-west" {
		t.Fatalf("connection %+v: want two connections, two clock estimates, an offset and the region", c)
	}
	if miss := math.Abs(*c.ClockOffsetMS + 100); miss > *c.ClockBoundMS+0.001 {
		t.Errorf("the last estimate is %.3f ms, the clock -100 ms: off by more than its bound %.3f ms", *c.ClockOffsetMS, *c.ClockBoundMS)
	}
	for _, want := range []string{"stepped: warning: its clock is +2", "stepped: warning: its clock is -"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	// Each estimate is within half its ping's round trip, which stderr
	// says for both (the JSON keeps the last): two requests may be off by
	// the larger, in opposite directions.
	slack := 2*largestBoundSaid(t, stderr) + 2*time.Microsecond // the lines round to 1 µs
	if d := got.Fleet.Start.Sub(trueStart).Abs(); d > slack {
		t.Errorf("the fleet starts %v from the true start (slack %v): not aligned", d, slack)
	}
	if span, want := got.Fleet.End.Sub(got.Fleet.Start), 9*10*time.Millisecond+50*time.Millisecond; (span - want).Abs() > slack {
		t.Errorf("the fleet spans %v, want %v (slack %v): the reconnection's events were moved by the old offset", span, want, slack)
	}
}

// largestBoundSaid is the largest clock estimate bound (±) of attach's
// clock lines on stderr.
func largestBoundSaid(t *testing.T, stderr string) time.Duration {
	t.Helper()
	var largest time.Duration
	said := regexp.MustCompile(`\(±([^,]+), over \d+ pings\)`).FindAllStringSubmatch(stderr, -1)
	for _, m := range said {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("clock line bound %q: %v", m[1], err)
		}
		largest = max(largest, d)
	}
	if len(said) == 0 {
		t.Fatalf("no clock line with a bound on stderr:\n%s", stderr)
	}
	return largest
}

// attach --record with several agents names each file by its agent's name,
// made safe for a path (a hostile name cannot reach another directory or
// put control characters in it); an agent that restarts mid-stream starts a
// new file, so no file holds two sessions.
func TestAttachRecordNamesFilesByAgent(t *testing.T) {
	t.Parallel()
	plain, _ := recordedAgent(t, "east", ttftSteps(5, 10, 1))
	hostileName := "../\x1b]0;HACKED\x07 evil"
	hostile, _ := recordedAgent(t, hostileName, ttftSteps(5, 10, 1))
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	first := &event.Session{Time: at, Name: "west", Target: "http://x", Load: event.Load{Mode: "closed"}}
	second := *first
	second.Time = at.Add(time.Hour) // the agent restarted: a new session
	restarting := serveAgentStream(t, "run-west", []event.Event{
		event.NewSession(first),
		event.NewRequest(&event.Request{ID: "w-1", Start: at, Intended: at, Outcome: event.OutcomeOK, TTFT: time.Millisecond, E2E: 2 * time.Millisecond}),
		event.NewSession(&second),
		event.NewRequest(&event.Request{ID: "w-2", Start: second.Time, Intended: second.Time, Outcome: event.OutcomeOK, TTFT: time.Millisecond, E2E: 2 * time.Millisecond}),
	})
	dir := t.TempDir()
	_, stderr, err := execute(t, "attach", plain.URL, hostile.URL, restarting.URL, "--no-tui", "--record", filepath.Join(dir, "fleet.lsr"))
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"fleet-_.__x1b_0_HACKED_x07_evil.lsr", "fleet-east.lsr", "fleet-west-2.lsr", "fleet-west.lsr"}
	if !slices.Equal(names, want) {
		t.Fatalf("files %q, want %q", names, want)
	}
	for file, id := range map[string]string{"fleet-west.lsr": "w-1", "fleet-west-2.lsr": "w-2"} {
		header, reqs := recordedRequests(t, filepath.Join(dir, file))
		if len(reqs) != 1 || reqs[0].Request.ID != id || header.Name != "west" {
			t.Errorf("%s holds %d requests (%v), want only %s", file, len(reqs), header, id)
		}
	}
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
