package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	gossh "golang.org/x/crypto/ssh"

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

// startWatch runs latscope watch with args until the test stops it; it
// returns where the watch serves its dashboard over ssh, the stop, and a
// channel closed when the command has returned.
func startWatch(t *testing.T, args ...string) (sshAddr string, stop context.CancelFunc, done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetArgs(append([]string{"watch"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(pw)
	go func() {
		defer close(ended)
		if err := root.ExecuteContext(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("watch: %v", err)
		}
		pw.Close()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "latscope watch: dashboard over ssh on "); ok {
				host, _, _ := strings.Cut(rest, ": ")
				addr <- host
			}
		}
		close(addr)
	}()
	t.Cleanup(func() { cancel(); <-ended })
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the watch ended without serving its dashboard over ssh")
		}
		return a, cancel, ended
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not say where it serves the dashboard over ssh")
	}
	return "", cancel, ended
}

// latscope watch --ssh serves the watch dashboard (your users, the server's
// histograms) to a key of the authorized keys file, as agent --ssh does;
// stopping the watch ends the session with exit status 0.
func TestWatchServesItsDashboardOverSSH(t *testing.T) {
	prof, err := sim.ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	url := simtest.Serve(t, sim.Config{Profile: prof, Background: sim.Background{Rate: 20, PromptTokens: 32, OutputTokens: 8}})
	dir := t.TempDir()
	key, keys := sshKeys(t, dir)
	addr, stop, done := startWatch(t, "--url", url, "--no-tui", "--no-gpu", "--scrape-interval", "100ms",
		"--ssh", "127.0.0.1:0", "--ssh-authorized-keys", keys, "--ssh-host-key", filepath.Join(dir, "host_key"), "--ssh-refresh", "100ms")
	client, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: "viewer", Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("ssh: %v", err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{got: make(chan struct{}, 1)}
	sess.Stdout, sess.Stderr = out, out
	if err := sess.RequestPty("xterm", 40, 120, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sess.Wait() }()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(ansi.Strip(out.String()), "vllm histograms") {
		select {
		case <-out.got:
		case err := <-exited:
			t.Fatalf("the session ended (%v) before the watch showed:\n%q", err, out.String())
		case <-deadline:
			t.Fatalf("no watch view within 30 s:\n%q", ansi.Strip(out.String()))
		}
	}
	if screen := ansi.Strip(out.String()); !strings.Contains(screen, "your users") || !strings.Contains(screen, "watching") {
		t.Errorf("the remote dashboard is not the watch view:\n%s", screen)
	}
	stop()
	<-done
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the session ended with %v when the watch stopped, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the session did not end with the watch")
	}
	if raw := out.String(); !strings.Contains(raw, "latscope watch: stopped; this dashboard ends here") {
		t.Errorf("the session did not say why it ended:\n%q", raw[max(0, len(raw)-400):])
	}
}
