package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/sim"
	"github.com/latscope/latscope/sim/simtest"
)

// An agent that watches (agent --watch, with a canary) serves the watch
// over its feed: attach, connected to it, gets the watch's header, so its
// dashboard takes the watch view, and its summary has the server's own
// traffic beside the canary's requests, each marked as the canary's. The
// agent prints the watch's summary.
func TestAttachShowsAgentsWatch(t *testing.T) {
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	url := simtest.Serve(t, sim.Config{Profile: prof, Background: sim.Background{Rate: 20, PromptTokens: 32, OutputTokens: 8}})
	agent := startAgent(t, "--url", url, "--watch", "--canary-rate", "5", "-d", "3s", "--scrape-interval", "100ms",
		"--no-gpu", "--linger", "30s", "--quiet")
	out, stderr, err := execute(t, "attach", "http://"+agent.addr, "--no-tui", "--json")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	agent.wait()
	if !strings.Contains(agent.stdout, "all traffic, as the server's") || !strings.Contains(agent.stdout, "the canary (latscope's own requests") {
		t.Errorf("the agent did not print the watch's summary:\n%s", agent.stdout)
	}
	var got struct {
		Agents map[string]aggregate.Summary `json:"agents"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("attach --json: %v\n%s", err, out)
	}
	if len(got.Agents) != 1 {
		t.Fatalf("attach shows %d agents, want 1:\n%s", len(got.Agents), out)
	}
	for name, s := range got.Agents {
		if s.Session == nil || s.Session.Load.Mode != event.LoadCanary {
			t.Errorf("agent %s: header %+v, want a watch with a canary", name, s.Session)
		}
		if s.Traffic == nil || !s.Traffic.Seen || s.Traffic.Dialect == "" {
			t.Errorf("agent %s: no traffic of the server's own: %+v", name, s.Traffic)
		}
		if s.Requests.Sent == 0 || s.Requests.Flags[event.FlagCanary] != s.Requests.Sent {
			t.Errorf("agent %s: the canary's requests are not all marked: sent %d, flags %v", name, s.Requests.Sent, s.Requests.Flags)
		}
	}
}

// A watch's recording replays as a watch (its summary is the watch's) and
// reports with the traffic section, in Markdown and JSON.
func TestWatchRecordingReplaysAndReports(t *testing.T) {
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	url := simtest.Serve(t, sim.Config{Profile: prof, Background: sim.Background{Rate: 20, PromptTokens: 32, OutputTokens: 8}})
	rec := filepath.Join(t.TempDir(), "watch.lsr")
	if _, stderr, err := execute(t, "watch", "--url", url, "--no-tui", "-d", "2s", "--scrape-interval", "100ms", "--no-gpu", "--record", rec); err != nil {
		t.Fatalf("watch: %v\n%s", err, stderr)
	}
	out, stderr, err := execute(t, "replay", rec, "--no-tui")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "all traffic, as the server's vllm metrics report it") {
		t.Errorf("replay does not print the watch's summary:\n%s", out)
	}
	out, stderr, err = execute(t, "report", rec)
	if err != nil {
		t.Fatalf("report: %v\n%s", err, stderr)
	}
	for _, want := range []string{"Your users' traffic (server-reported, the server's vllm metrics", "Where your users' time went", "bucket estimates"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	out, _, err = execute(t, "report", rec, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got aggregate.Summary
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Traffic == nil || !got.Traffic.Seen {
		t.Errorf("report --format json has no traffic: %+v", got.Traffic)
	}
}
