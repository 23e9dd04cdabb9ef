package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultHeader names the request header that injects faults into one request.
const FaultHeader = "X-Latscope-Fault"

// Fault is a set of injected failures. The zero value injects nothing.
// Parse one from a spec such as "stall=200,reset-after=5" with ParseFault.
type Fault struct {
	Status         int  // status=N: answer with this HTTP status and an error body
	ResetAfter     int  // reset-after=N: reset the connection after N content tokens
	Reset          bool //   (set when ResetAfter is in use; N may be 0)
	MalformedAfter int  // malformed-after=N: a broken JSON chunk after N content tokens
	Malformed      bool //   (set when MalformedAfter is in use)
	// error-after=N: generation fails after N content tokens. A stream, whose
	// 200 status is already out, gets an error event and [DONE], as vLLM and
	// SGLang send; a non-streaming request gets a 500.
	ErrorAfter  int
	Error       bool          //   (set when ErrorAfter is in use)
	Stall       time.Duration // stall=MS: the engine pauses the sequence halfway through
	SlowHeaders time.Duration // slow-headers=MS: delay before the response headers
	Oversized   bool          // oversized: one SSE event over 1 MiB, halfway through
	SplitUTF8   bool          // split-utf8: a two-byte character split across two chunks, halfway through
}

// IsZero reports whether f injects nothing.
func (f Fault) IsZero() bool { return f == Fault{} }

// String gives f back as a spec.
func (f Fault) String() string {
	var parts []string
	if f.Status != 0 {
		parts = append(parts, fmt.Sprintf("status=%d", f.Status))
	}
	if f.Reset {
		parts = append(parts, fmt.Sprintf("reset-after=%d", f.ResetAfter))
	}
	if f.Malformed {
		parts = append(parts, fmt.Sprintf("malformed-after=%d", f.MalformedAfter))
	}
	if f.Error {
		parts = append(parts, fmt.Sprintf("error-after=%d", f.ErrorAfter))
	}
	if f.Stall > 0 {
		parts = append(parts, fmt.Sprintf("stall=%d", f.Stall.Milliseconds()))
	}
	if f.SlowHeaders > 0 {
		parts = append(parts, fmt.Sprintf("slow-headers=%d", f.SlowHeaders.Milliseconds()))
	}
	if f.Oversized {
		parts = append(parts, "oversized")
	}
	if f.SplitUTF8 {
		parts = append(parts, "split-utf8")
	}
	return strings.Join(parts, ",")
}

// maxFaultDelay bounds stall and slow-headers so a typo cannot hang a server.
const maxFaultDelay = 10 * time.Minute

// ParseFault parses a comma-separated fault spec: status=429|500|503 (any
// 4xx/5xx is accepted), reset-after=N, malformed-after=N, error-after=N, stall=MS,
// slow-headers=MS, oversized, split-utf8. An empty spec is no fault.
func ParseFault(spec string) (Fault, error) {
	var f Fault
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if err := f.apply(parseFaultItem(item)); err != nil {
			return Fault{}, err
		}
	}
	return f, nil
}

// faultItem is one key[=value] of a fault spec.
type faultItem struct {
	key, val string
	hasVal   bool
}

func parseFaultItem(item string) faultItem {
	key, val, hasVal := strings.Cut(item, "=")
	return faultItem{key: strings.ToLower(strings.TrimSpace(key)), val: strings.TrimSpace(val), hasVal: hasVal}
}

// num reads the item's value as a non-negative count.
func (it faultItem) num() (int, error) {
	if !it.hasVal {
		return 0, fmt.Errorf("fault %q needs a value (%s=N)", it.key, it.key)
	}
	n, err := strconv.Atoi(it.val)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("fault %q: want a non-negative integer, got %q", it.key, it.val)
	}
	return n, nil
}

// millis reads the item's value as milliseconds, up to maxFaultDelay.
func (it faultItem) millis() (time.Duration, error) {
	n, err := it.num()
	if err != nil {
		return 0, err
	}
	d := time.Duration(n) * time.Millisecond
	if d > maxFaultDelay {
		return 0, fmt.Errorf("fault %q: %d ms is over the %v limit", it.key, n, maxFaultDelay)
	}
	return d, nil
}

// flag checks that a fault that is only a name was given no value.
func (it faultItem) flag() error {
	if it.hasVal {
		return fmt.Errorf("fault %q takes no value", it.key)
	}
	return nil
}

// apply sets the fault the item names.
func (f *Fault) apply(it faultItem) error {
	var err error
	switch it.key {
	case "status":
		f.Status, err = it.num()
		if err == nil && (f.Status < 400 || f.Status > 599) {
			err = fmt.Errorf("fault status: want a 4xx or 5xx code, got %d", f.Status)
		}
	case "reset-after":
		f.ResetAfter, err = it.num()
		f.Reset = true
	case "malformed-after":
		f.MalformedAfter, err = it.num()
		f.Malformed = true
	case "error-after":
		f.ErrorAfter, err = it.num()
		f.Error = true
	case "stall":
		f.Stall, err = it.millis()
	case "slow-headers":
		f.SlowHeaders, err = it.millis()
	case "oversized":
		f.Oversized = true
		err = it.flag()
	case "split-utf8":
		f.SplitUTF8 = true
		err = it.flag()
	default:
		err = fmt.Errorf("unknown fault %q (want status, reset-after, malformed-after, error-after, stall, slow-headers, oversized or split-utf8)", it.key)
	}
	return err
}

// merge adds g's faults to f (g wins where both set one).
func (f Fault) merge(g Fault) Fault {
	if g.Status != 0 {
		f.Status = g.Status
	}
	if g.Reset {
		f.Reset, f.ResetAfter = true, g.ResetAfter
	}
	if g.Malformed {
		f.Malformed, f.MalformedAfter = true, g.MalformedAfter
	}
	if g.Error {
		f.Error, f.ErrorAfter = true, g.ErrorAfter
	}
	if g.Stall > 0 {
		f.Stall = g.Stall
	}
	if g.SlowHeaders > 0 {
		f.SlowHeaders = g.SlowHeaders
	}
	f.Oversized = f.Oversized || g.Oversized
	f.SplitUTF8 = f.SplitUTF8 || g.SplitUTF8
	return f
}
