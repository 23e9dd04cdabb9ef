package main

import (
	"strings"
	"testing"
)

// TestFlagsAgree: each command takes only the flags it uses, the help says
// what the flags do, and --version answers.
func TestFlagsAgree(t *testing.T) {
	if stdout, _, err := execute(t, "--version"); err != nil || !strings.HasPrefix(stdout, "latscope ") {
		t.Errorf("--version: %q, %v", stdout, err)
	}
	for _, flag := range []string{"--no-tui", "--no-color", "--window=1m", "--json"} {
		_, _, err := execute(t, "agent", "--url", "http://127.0.0.1:1", flag)
		if err == nil || !strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("agent %s: %v, want an unknown flag (an agent has no dashboard and prints no summary)", flag, err)
		}
	}
	for _, cmd := range []string{"run", "demo", "sweep", "agent"} {
		help, _, err := execute(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(help, "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "--record ") && !strings.HasPrefix(l, "--record string") {
				t.Errorf("%s --help: %q: --record's value should read as a file name", cmd, strings.TrimSpace(line))
			}
		}
		if cmd == "agent" && !strings.Contains(help, "run until stopped") {
			t.Errorf("agent --help does not say it runs until stopped by default")
		}
	}
	help, _, _ := execute(t, "report", "--help")
	if strings.Contains(help, `(default "md")`) {
		t.Errorf("report --help gives two defaults for --format")
	}
}
