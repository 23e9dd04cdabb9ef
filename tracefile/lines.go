package tracefile

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/probe"
)

// jsonTraceLine is a line of latscope's JSONL trace.
type jsonTraceLine struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	PromptTokens *int            `json:"prompt_tokens"`
	OutputTokens *int            `json:"output_tokens"`
}

func parseJSONLine(line []byte) (probe.TraceRequest, error) {
	var l jsonTraceLine
	if err := json.Unmarshal(line, &l); err != nil {
		return probe.TraceRequest{}, fmt.Errorf("not a JSON object: %w", err)
	}
	at, err := parseTimestamp(l.Timestamp)
	if err != nil {
		return probe.TraceRequest{}, err
	}
	return traceRequest(at, l.PromptTokens, l.OutputTokens, "prompt_tokens", "output_tokens")
}

// parseTimestamp reads latscope's timestamp: seconds as a number, or an
// RFC 3339 time.
func parseTimestamp(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 {
		return 0, errors.New("timestamp: missing")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("timestamp %q: want seconds or an RFC 3339 time", s)
		}
		return time.Duration(t.UnixNano()), nil
	}
	var sec float64
	if err := json.Unmarshal(raw, &sec); err != nil {
		return 0, fmt.Errorf("timestamp %s: want seconds or an RFC 3339 time", excerpt(raw, 40))
	}
	return seconds(sec)
}

// seconds turns a trace's seconds into a duration, refusing what does not
// fit.
func seconds(sec float64) (time.Duration, error) {
	d := sec * float64(time.Second)
	if math.IsNaN(d) || math.IsInf(d, 0) || math.Abs(d) >= math.MaxInt64/2 {
		return 0, fmt.Errorf("timestamp %v: out of range", sec)
	}
	return time.Duration(d), nil
}

// mooncakeLine is a line of the Mooncake trace.
type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"` // ms
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

func parseMooncakeLine(line []byte) (probe.TraceRequest, error) {
	var l mooncakeLine
	if err := json.Unmarshal(line, &l); err != nil {
		return probe.TraceRequest{}, fmt.Errorf("not a Mooncake trace line: %w", err)
	}
	if l.Timestamp == nil {
		return probe.TraceRequest{}, errors.New("timestamp: missing")
	}
	at, err := seconds(*l.Timestamp / 1000)
	if err != nil {
		return probe.TraceRequest{}, err
	}
	r, err := traceRequest(at, l.InputLength, l.OutputLength, "input_length", "output_length")
	if err != nil {
		return r, err
	}
	for i, id := range l.HashIDs {
		if id < 0 {
			return probe.TraceRequest{}, fmt.Errorf("hash_ids[%d] %d: want 0 or more", i, id)
		}
		r.HashIDs = append(r.HashIDs, uint64(id))
	}
	return r, nil
}

// azureTime is the Azure trace's timestamp layout (fractions of a second,
// any number of digits, may follow).
const azureTime = "2006-01-02 15:04:05"

func parseAzureLine(line []byte) (probe.TraceRequest, error) {
	f, err := csvFields(line, 3)
	if err != nil {
		return probe.TraceRequest{}, err
	}
	t, err := time.Parse(azureTime, f[0])
	if err != nil {
		return probe.TraceRequest{}, fmt.Errorf("TIMESTAMP %q: want a time like 2023-11-16 18:15:46.6805900", excerpt([]byte(f[0]), 40))
	}
	prompt, err := csvInt(f[1], "ContextTokens")
	if err != nil {
		return probe.TraceRequest{}, err
	}
	out, err := csvInt(f[2], "GeneratedTokens")
	if err != nil {
		return probe.TraceRequest{}, err
	}
	return traceRequest(time.Duration(t.UnixNano()), &prompt, &out, "ContextTokens", "GeneratedTokens")
}

func parseCSVLine(line []byte) (probe.TraceRequest, error) {
	f, err := csvFields(line, 3)
	if err != nil {
		return probe.TraceRequest{}, err
	}
	var at time.Duration
	if sec, err := strconv.ParseFloat(f[0], 64); err == nil {
		if at, err = seconds(sec); err != nil {
			return probe.TraceRequest{}, err
		}
	} else if t, err := time.Parse(time.RFC3339Nano, f[0]); err == nil {
		at = time.Duration(t.UnixNano())
	} else {
		return probe.TraceRequest{}, fmt.Errorf("timestamp %q: want seconds or an RFC 3339 time", excerpt([]byte(f[0]), 40))
	}
	prompt, err := csvInt(f[1], "prompt_tokens")
	if err != nil {
		return probe.TraceRequest{}, err
	}
	out, err := csvInt(f[2], "output_tokens")
	if err != nil {
		return probe.TraceRequest{}, err
	}
	return traceRequest(at, &prompt, &out, "prompt_tokens", "output_tokens")
}

// csvFields splits one CSV record into exactly n trimmed fields.
func csvFields(line []byte, n int) ([]string, error) {
	r := csv.NewReader(bytes.NewReader(line))
	r.FieldsPerRecord = n
	f, err := r.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("want %d comma-separated fields: %w", n, err)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f, nil
}

func csvInt(s, name string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a whole number of tokens", name, excerpt([]byte(s), 40))
	}
	return n, nil
}

// traceRequest checks a request's lengths. A request that asks for no
// output is sent asking for one token: a stream without a token has no
// timing to show.
func traceRequest(at time.Duration, prompt, output *int, promptName, outputName string) (probe.TraceRequest, error) {
	switch {
	case prompt == nil:
		return probe.TraceRequest{}, fmt.Errorf("%s: missing", promptName)
	case output == nil:
		return probe.TraceRequest{}, fmt.Errorf("%s: missing", outputName)
	case *prompt < 1 || *prompt > probe.MaxTraceTokens:
		return probe.TraceRequest{}, fmt.Errorf("%s %d: want 1 to %d tokens", promptName, *prompt, probe.MaxTraceTokens)
	case *output < 0 || *output > probe.MaxTraceTokens:
		return probe.TraceRequest{}, fmt.Errorf("%s %d: want 0 to %d tokens", outputName, *output, probe.MaxTraceTokens)
	}
	return probe.TraceRequest{At: at, PromptTokens: *prompt, OutputTokens: max(*output, 1)}, nil
}

// excerpt is b cut to n bytes, for an error message.
func excerpt(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
