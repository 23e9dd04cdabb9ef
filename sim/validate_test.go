package sim

import (
	"strings"
	"testing"
	"time"
)

// Validate names each wrong setting by the sim command's flag, all at once.
func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	bad := Config{MaxNumSeqs: -1, TokenizerPool: -2, Loading: -time.Second, FaultRate: 1.5}
	bad.Reasoning.Tokens = -3
	err := bad.Validate()
	for _, want := range []string{"max-num-seqs -1", "tokenizer-pool -2", "reasoning-tokens -3", "loading -1s", "fault-rate 1.5"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
	if _, err := New(bad); err == nil {
		t.Error("New accepted a Config Validate refuses")
	}
}
