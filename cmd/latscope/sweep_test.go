package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSweepSmoke runs a short sweep with the default (constant) arrivals,
// which the result names.
func TestSweepSmoke(t *testing.T) {
	t.Parallel()
	url := serveTinySim(t)
	out, stderr, err := execute(t, "sweep", "--url", url, "--no-tui", "--json", "--rates", "10,20", "--refine", "0",
		"--steady-window", "1s", "--step-warmup", "300ms", "--step-max", "3s", "--prompt-tokens", "32", "--output-tokens", "8",
		"--no-gpu", "--scrape-interval", "200ms")
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, stderr)
	}
	var res struct {
		Arrival string `json:"arrival"`
		Steps   []struct {
			Sent int64 `json:"sent"`
		} `json:"steps"`
		Saturation any `json:"saturation"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if res.Arrival != "constant" {
		t.Errorf("arrival %q, want the sweep's default, constant", res.Arrival)
	}
	if len(res.Steps) != 2 || res.Steps[0].Sent == 0 || res.Saturation == nil {
		t.Errorf("sweep result %+v: want two measured steps and a saturation finding\n%s", res, out)
	}
}

func TestSweepBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep"}, "--url is required"},
		{[]string{"sweep", "--url", "http://127.0.0.1:1", "--rates", "1,x"}, "--rates"},
		{[]string{"sweep", "--url", "http://127.0.0.1:1", "--rates", "1", "--streams", "2"}, "give one"},
		{[]string{"sweep", "--url", "http://127.0.0.1:1", "--stop-errors", "lots"}, "--stop-errors"},
		{[]string{"sweep", "--url", "http://127.0.0.1:1", "--rate-start", "0"}, "start"},
	} {
		_, _, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("latscope %s: err = %v, want it to mention %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
