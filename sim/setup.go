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
