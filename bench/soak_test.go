package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRunSoakJudges(t *testing.T) {
	t.Parallel()
	const mb = 1_000_000
	points := map[string][]SoakPoint{
		SoakHeadless: {{At: time.Second, Heap: 10 * mb, RSS: 40 * mb}, {At: 2 * time.Second, Heap: 10.5 * mb, RSS: 41 * mb, Tokens: 1000}},
		SoakEndless:  {{At: time.Second, Heap: 10 * mb, RSS: 40 * mb}, {At: 2 * time.Second, Heap: 20 * mb, RSS: 41 * mb}},
		SoakRecord:   {{At: time.Second, Heap: 10 * mb, RSS: 160 * mb}, {At: 2 * time.Second, Heap: 10 * mb, RSS: 40 * mb}},
	}
	res, err := RunSoak(context.Background(), SoakConfig{
		Cases:       []string{SoakHeadless, SoakEndless, SoakRecord, SoakAgent},
		Checkpoints: []time.Duration{time.Second, 2 * time.Second},
		Parallel:    2,
		RunCase: func(_ context.Context, name string, _ []time.Duration) ([]SoakPoint, error) {
			if name == SoakAgent {
				return nil, errors.New("boom")
			}
			return points[name], nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{SoakHeadless: true, SoakEndless: false, SoakRecord: false, SoakAgent: false}
	for _, c := range res.Cases {
		if c.Met != want[c.Name] {
			t.Errorf("%s: met = %v, want %v (%+v)", c.Name, c.Met, want[c.Name], c)
		}
	}
	if res.Met {
		t.Error("result met with cases missed")
	}
	if got := res.Cases[0].TokensPerSec; got != 1000 {
		t.Errorf("headless tokens/s = %v, want 1000", got)
	}
	var out bytes.Buffer
	if err := WriteSoakTable(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"PASS", "MISSED", "agent: boom", "heap@1s", "2.00x"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

func TestSoakConfigValidate(t *testing.T) {
	t.Parallel()
	run := func(context.Context, string, []time.Duration) ([]SoakPoint, error) { return nil, nil }
	for _, tt := range []struct {
		cfg  SoakConfig
		want string
	}{
		{SoakConfig{Cases: []string{"x"}, Checkpoints: []time.Duration{time.Second}, RunCase: run}, "unknown case"},
		{SoakConfig{Cases: SoakCases, RunCase: run}, "need at least one"},
		{SoakConfig{Cases: SoakCases, Checkpoints: []time.Duration{2 * time.Second, time.Second}, RunCase: run}, "must increase"},
	} {
		if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestReadRSS(t *testing.T) {
	t.Parallel()
	rss, err := ReadRSS()
	if err != nil {
		t.Skip(err) // no /proc here
	}
	if rss == 0 {
		t.Error("RSS 0")
	}
}
