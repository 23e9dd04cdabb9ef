package sim

import (
	"strings"
	"testing"
	"time"
)

func TestFaultRateNeedsAFault(t *testing.T) {
	if err := (Config{FaultRate: 0.5}).Validate(); err == nil || !strings.Contains(err.Error(), "needs a fault") {
		t.Errorf("a fault rate without a fault: %v", err)
	}
	f, err := ParseFault("status=503")
	if err != nil {
		t.Fatal(err)
	}
	if err := (Config{Fault: f, FaultRate: 0.5}).Validate(); err != nil {
		t.Errorf("a fault at half the requests: %v", err)
	}
}

func TestPrefixCacheBlocks(t *testing.T) {
	for _, tc := range []struct {
		blocks, tokens, want int
		ok                   bool
	}{{0, 0, 0, true}, {8, 0, 8, true}, {0, 17, 2, true}, {0, 16, 1, true}, {4, 16, 0, false}, {-1, 0, 0, false}} {
		got, err := PrefixCacheBlocks(tc.blocks, tc.tokens)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("PrefixCacheBlocks(%d, %d) = %d, %v", tc.blocks, tc.tokens, got, err)
		}
	}
}

func TestDeploymentFor(t *testing.T) {
	d, said, err := Deployment{Network: Network{RTT: time.Millisecond}}.For(Config{Seed: 9, Nagle: true})
	if err != nil || !d.NoProxy || d.Network.Seed != 9 || !strings.Contains(said, "no proxy in front") {
		t.Errorf("--nagle: %+v %q %v", d, said, err)
	}
	_, said, _ = Deployment{}.For(Config{Disagg: Disagg{Enabled: true, KVBandwidth: 1e9}})
	if !strings.Contains(said, "disaggregated: 1 prefill and 1 decode workers") {
		t.Errorf("--disagg: %q", said)
	}
	if _, _, err := (Deployment{Network: Network{RTT: -time.Second}}).For(Config{}); err == nil {
		t.Error("a negative RTT: no error")
	}
}
