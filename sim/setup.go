package sim

import (
	"errors"
	"fmt"
)

// PrefixCacheBlocks is the prefix cache's size in blocks, given in blocks
// or in tokens (rounded up to whole blocks), at most one of them.
func PrefixCacheBlocks(blocks, tokens int) (int, error) {
	switch {
	case blocks < 0 || tokens < 0:
		return 0, errors.New("--prefix-cache-blocks, --prefix-cache-tokens: want 0 (off) or more")
	case blocks > 0 && tokens > 0:
		return 0, errors.New("give --prefix-cache-blocks or --prefix-cache-tokens, not both")
	case tokens > 0:
		return (tokens + PrefixBlockTokens - 1) / PrefixBlockTokens, nil
	}
	return blocks, nil
}

// For is the deployment as cfg needs it, and its description for a start
// line: the network draws from cfg's seed; --close-after-stream and
// --nagle act on the client's own connection, so no proxy stands in
// front; a disaggregated server says its pools and link.
func (d Deployment) For(cfg Config) (Deployment, string, error) {
	if err := d.Network.Validate(); err != nil {
		return d, "", fmt.Errorf("--rtt, --jitter: %w", err)
	}
	d.Network.Seed = cfg.Seed
	described := d.Describe()
	if !d.NoProxy && (cfg.CloseAfterStream || cfg.Nagle) {
		d.NoProxy = true
		described = d.Describe() + "; no proxy in front: --close-after-stream and --nagle act on the client's connection"
	}
	if cfg.Disagg.Enabled {
		described += "; " + cfg.Disagg.Describe()
	}
	return d, described, nil
}

// Describe says what the disaggregated deployment is, for a start line.
func (d Disagg) Describe() string {
	return fmt.Sprintf("disaggregated: %d prefill and %d decode workers, KV link %d B/token at %.3g B/s + %v (%v for 512 tokens)",
		max(d.PrefillWorkers, 1), max(d.DecodeWorkers, 1), d.KVBytesPerToken, d.KVBandwidth, d.KVLatency, d.TransferTime(512))
}

// Written is the part of a simulator's configuration a command line gives
// as text: the profile's name, --prefix-cache-tokens, --reasoning-field,
// --headers, --fault, and whether --fault-rate was given at all.
type Written struct {
	Profile, ReasoningField, Headers, Fault string
	PrefixCacheTokens                       int
	FaultRateGiven                          bool
}

// Read parses w into c, each error naming the flag to change. A fault
// rate not given means 0 without a fault (the flag's default of 1 is for a
// --fault); a rate of 0 given with a fault is refused, since here it would
// apply the fault to no request, while the library's 0 means every one.
func (c *Config) Read(w Written) error {
	var err error
	if c.Profile, err = ProfileByName(w.Profile); err != nil {
		return err
	}
	if c.PrefixCacheBlocks, err = PrefixCacheBlocks(c.PrefixCacheBlocks, w.PrefixCacheTokens); err != nil {
		return err
	}
	if c.Reasoning.Field, err = ParseReasoningField(w.ReasoningField); err != nil {
		return fmt.Errorf("--reasoning-field: %w", err)
	}
	if c.Headers, err = ParseHeaderTiming(w.Headers); err != nil {
		return fmt.Errorf("--headers: %w", err)
	}
	if c.Fault, err = ParseFault(w.Fault); err != nil {
		return fmt.Errorf("--fault: %w", err)
	}
	switch {
	case c.Fault.IsZero() && !w.FaultRateGiven:
		c.FaultRate = 0
	case !c.Fault.IsZero() && c.FaultRate == 0:
		return errors.New("--fault-rate 0 applies the fault to no request; drop --fault instead")
	}
	return nil
}
