package agent

import (
	"errors"
	"testing"
	"time"
)

// Agents whose clocks are off by +250 ms, 0 and -100 ms (injected clocks on
// the same machine): attach's estimate of each offset is within half the
// round trip of the ping it kept, the bound NTP's arithmetic gives, however
// slow the host; the figures are logged.
func TestClockOffsetIsEstimatedWithinHalfTheRoundTrip(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{250 * time.Millisecond, 0, -100 * time.Millisecond} {
		a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}, Now: func() time.Time { return time.Now().Add(skew) }})
		c, err := NewClient(ClientConfig{URL: a.url, Token: rightToken})
		if err != nil {
			t.Fatal(err)
		}
		off, err := c.EstimateClockOffset(t.Context(), 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		miss := (off.Offset - skew).Abs()
		t.Logf("skew %v: estimated %v (off by %v, bound %v, %d pings)", skew, off.Offset, miss, off.Bound(), off.Samples)
		// A microsecond for the wall clock's rounding on the wire.
		if off.Samples != 8 || miss > off.Bound()+time.Microsecond {
			t.Errorf("skew %v: estimated %v from %d pings, off by %v, more than half the round trip %v", skew, off.Offset, off.Samples, miss, off.RTT)
		}
	}
}

func TestClockOffsetNeedsTheToken(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{Listen: ListenConfig{Token: rightToken}})
	c, err := NewClient(ClientConfig{URL: a.url, Token: wrongToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EstimateClockOffset(t.Context(), 8, nil); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("with a wrong token: %v, want ErrUnauthorized", err)
	}
}
