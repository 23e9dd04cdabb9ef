package agent

import (
	"testing"
	"time"
)

func TestBackoffIsCappedAndJittered(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for attempt, ceiling := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second,
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.delay(attempt)
			if d < ceiling/2 || d > ceiling {
				t.Fatalf("attempt %d: waited %v, want within [%v, %v]", attempt, d, ceiling/2, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("attempt %d: %d distinct waits in 200: not jittered", attempt, len(seen))
		}
	}
}

func TestEventsURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"gpu-box:7070":                     "http://gpu-box:7070/events",
		"http://gpu-box:7070":              "http://gpu-box:7070/events",
		"https://gpu-box:7070/":            "https://gpu-box:7070/events",
		"https://proxy.example/lat/events": "https://proxy.example/lat/events",
	} {
		got, _, err := eventsURL(in)
		if err != nil || got != want {
			t.Errorf("eventsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://x/", "http://"} {
		if _, _, err := eventsURL(bad); err == nil {
			t.Errorf("eventsURL(%q) accepted", bad)
		}
	}
}
