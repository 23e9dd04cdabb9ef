//go:build acceptance

package main

// The dashboard under a real terminal multiplexer: tmux runs the test
// binary as latscope, and the test reads the screen (capture-pane) and the
// pane's title and window name, which a raw OSC sequence would change.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latscope/latscope/internal/textsafe/hostile"
)

// tmuxPane is one detached tmux session on a private socket, 200×50.
type tmuxPane struct {
	t      *testing.T
	socket string
}

// startTmux runs latscope with args in a new tmux pane whose title and
// window name are set to "before" first, or skips where tmux is missing.
func startTmux(t *testing.T, args ...string) *tmuxPane {
	t.Helper()
	return startTmuxScript(t, "export LATSCOPE_TEST_MAIN='"+strings.Join(args, "\x1f")+"'\nexec '"+os.Args[0]+"'")
}

// startTmuxScript runs the shell script body in a new tmux pane, as
// startTmux runs latscope.
func startTmuxScript(t *testing.T, body string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (apt-get install tmux): the dashboard's terminal test needs it")
	}
	dir := t.TempDir()
	p := &tmuxPane{t: t, socket: filepath.Join(dir, "tmux.sock")}
	script := filepath.Join(dir, "latscope.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The pane starts idle, so that its title and name are set before
	// latscope writes anything, then latscope replaces the idle command.
	p.tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "50", "sleep 600")
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	p.tmux("set-option", "-g", "remain-on-exit", "on")
	p.tmux("set-option", "-g", "allow-rename", "on")
	p.tmux("rename-window", "-t", "t", "before")
	p.tmux("select-pane", "-t", "t", "-T", "before")
	p.tmux("respawn-pane", "-k", "-t", "t", script)
	return p
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (p *tmuxPane) screen() string { return p.tmux("capture-pane", "-p", "-t", "t") }

// names are the pane's title and its window's name.
func (p *tmuxPane) names() string {
	return strings.TrimSpace(p.tmux("display-message", "-p", "-t", "t", "#{pane_title}|#{window_name}"))
}

// waitFor polls the screen until ok says it is there, or fails after
// within; it returns the screen and how long it took.
func (p *tmuxPane) waitFor(what string, within time.Duration, ok func(string) bool) (string, time.Duration) {
	p.t.Helper()
	start := time.Now()
	for {
		s := p.screen()
		if ok(s) {
			return s, time.Since(start)
		}
		if time.Since(start) > within {
			p.t.Fatalf("%s not on the screen within %v:\n%s", what, within, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// quit presses q and waits for latscope to end.
func (p *tmuxPane) quit() {
	p.t.Helper()
	p.tmux("send-keys", "-t", "t", "q")
	deadline := time.Now().Add(30 * time.Second)
	for strings.TrimSpace(p.tmux("display-message", "-p", "-t", "t", "#{pane_dead}")) != "1" {
		if time.Now().After(deadline) {
			p.t.Fatalf("latscope did not end within 30 s of q:\n%s", p.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// On the dashboard, a hostile server's errors, a tampered recording's
// fields and a hostile agent's appear escaped ("\x1b" as text), and the
// pane's title and window name stay as they were.
func TestDashboardShowsHostileTextEscapedUnderTmux(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "tampered.lsr")
	hostileRecording(t, rec)
	agentURL := hostileAgent(t)
	for _, tc := range []struct {
		args []string
		tab  bool // the text is in the requests view (their errors)
	}{
		{[]string{"run", "--url", hostileServer(t), "--dialect", "openai-chat", "--model", "m", "--no-gpu", "-n", "4", "-c", "2",
			"--prompt-tokens", "8", "--output-tokens", "4", "--no-color"}, true},
		{[]string{"replay", rec, "--speed", "max", "--no-color"}, true},
		{[]string{"attach", agentURL, "--no-color"}, false},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			p := startTmux(t, tc.args...)
			if tc.tab {
				p.waitFor("the dashboard", 30*time.Second, func(s string) bool { return strings.Contains(s, "errors 100.0%") })
				p.tmux("send-keys", "-t", "t", "Tab")
			}
			screen, _ := p.waitFor("the hostile text, escaped", 30*time.Second, func(s string) bool {
				return strings.Contains(s, hostile.Word) && strings.Contains(s, `\x1b`)
			})
			if got := p.names(); got != "before|before" {
				t.Errorf("the pane's title and window name are %q, want them unchanged (before|before)\n%s", got, screen)
			}
			p.quit()
			if got := p.names(); got != "before|before" {
				t.Errorf("after latscope ended, the pane's title and window name are %q, want them unchanged", got)
			}
		})
	}
}

// Three agents on the dashboard; one is killed: within 5 s its row says
// lost and the header "2 of 3 agents live".
func TestDashboardShowsAKilledAgentLostUnderTmux(t *testing.T) {
	names := []string{"east", "west", "north"}
	urls := make([]string, len(names))
	kills := map[string]func(){}
	for i, name := range names {
		urls[i], kills[name] = liveAgent(t, name)
	}
	p := startTmux(t, append([]string{"attach", "--token", "tok-0123456789abcdef", "--no-color"}, urls...)...)
	p.waitFor("three agents live", 30*time.Second, func(s string) bool { return strings.Contains(s, "fleet · 3 agents live") })
	kills["west"]()
	screen, took := p.waitFor("west lost", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "2 of 3 agents live") && lineWith(s, "west", "lost")
	})
	t.Logf("west shown lost %v after it was killed", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("west shown lost %v after it was killed, want within 5 s\n%s", took, screen)
	}
	p.quit()
}

// lineWith reports whether one line of s holds every word.
func lineWith(s string, words ...string) bool {
	for line := range strings.SplitSeq(s, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

// attach's dashboard, under tmux, shows the GPUs a running agent reads
// from a dcgm-exporter's and an AMD device-metrics-exporter's pages
// (served over HTTP), each with the exporter and node it came from.
func TestAttachDashboardShowsExporterGPUsUnderTmux(t *testing.T) {
	dcgm, _ := gpuExporterPage(t, "dcgm_default.prom")
	amd, _ := gpuExporterPage(t, "amd_mi300x.prom")
	agent := startAgent(t, "--url", serveTinySim(t), "--rate", "2", "--prompt-tokens", "16", "--output-tokens", "4",
		"--gpu-metrics-url", dcgm, "--gpu-metrics-url", amd, "--quiet")
	p := startTmux(t, "attach", "http://"+agent.addr, "--no-color")
	screen, took := p.waitFor("the exporters' GPUs", 30*time.Second, func(s string) bool {
		return strings.Count(s, "dcgm gpu-node-a") == 2 && strings.Count(s, "amd mi300-node-1") == 2
	})
	t.Logf("the four GPUs shown %v after attach started", took.Round(time.Millisecond))
	if !strings.Contains(screen, "H100") || !strings.Contains(screen, "MI300X") {
		t.Errorf("the GPUs' names are not on the screen:\n%s", screen)
	}
	p.quit()
}
