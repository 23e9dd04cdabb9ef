package tui

import (
	"strings"
	"testing"
)

// TestWholeRequestDecodeGaps: decode runs from the first token to the last,
// so its figure is the gaps between the tokens, one fewer than the tokens,
// times the time per gap, and it multiplies out.
func TestWholeRequestDecodeGaps(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	bd := breakdown{total: 100, decode: 496.57, tokens: 128}
	title := wholeRequest(st, bd, 200)[0]
	if !strings.Contains(title, "(128 tokens: 127 gaps × 3.91 ms)") {
		t.Errorf("title %q, want the decode as 128 tokens: 127 gaps × 3.91 ms (127 × 3.91 ms = 496.6 ms)", title)
	}
}

// TestWholeRequestDecodeGapsNarrow: where the whole title does not fit, the
// gaps and the time per gap stay whole and the token count goes.
func TestWholeRequestDecodeGapsNarrow(t *testing.T) {
	st := newStyles(plainRenderer(), true)
	bd := breakdown{total: 182, decode: 1390, tokens: 64}
	title := wholeRequest(st, bd, 80)[0]
	if !strings.Contains(title, "(63 gaps × 22.1 ms)") {
		t.Errorf("title %q, want the decode as 63 gaps × 22.1 ms", title)
	}
}
