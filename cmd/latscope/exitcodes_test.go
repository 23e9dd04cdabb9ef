package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// One outcome, one exit code, whichever command shows it: a server that
// refuses every completion with 429 (every finished request failed, 3) and
// one that answers every request (0), measured by run and by an agent,
// shown by attach, replayed, reported and swept.
func TestEveryCommandGivesTheOutcomesExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		refuse bool
		want   int
	}{
		{"every request refused", true, exitAllFailed},
		{"every request answered", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := tinySim(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.refuse && isCompletion(r) {
					http.Error(w, `{"error":{"message":"rate limited"}}`, http.StatusTooManyRequests)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			dir := t.TempDir()
			load := []string{"-n", "6", "-c", "2", "--prompt-tokens", "16", "--output-tokens", "4", "--no-gpu", "--no-metrics"}

			runRec := filepath.Join(dir, "run.lsr")
			_, _, err := execute(t, append([]string{"run", "--url", srv.URL, "--no-tui", "--record", runRec}, load...)...)
			assertExit(t, "run", err, tc.want)

			agentRec := filepath.Join(dir, "agent.lsr")
			agent := startAgent(t, append([]string{"--url", srv.URL, "--linger", "30s", "--quiet", "--record", agentRec}, load...)...)
			_, _, err = execute(t, "attach", "http://"+agent.addr, "--no-tui")
			assertExit(t, "attach", err, tc.want)
			agent.wait()
			assertExit(t, "agent", agent.err, tc.want)

			for _, rec := range []string{runRec, agentRec} {
				_, _, err = execute(t, "replay", rec, "--no-tui")
				assertExit(t, "replay "+filepath.Base(rec), err, tc.want)
				_, _, err = execute(t, "report", rec, "-o", rec+".md")
				assertExit(t, "report "+filepath.Base(rec), err, tc.want)
			}

			_, _, err = execute(t, append([]string{"sweep", "--url", srv.URL, "--rates", "20"}, shortSweep...)...)
			assertExit(t, "sweep", err, tc.want)
		})
	}
}
