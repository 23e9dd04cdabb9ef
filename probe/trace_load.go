package probe

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/recorder"
)

// The trace formats ReadTrace knows.
const (
	TraceRecording = "recording" // a latscope recording: its requests' intended times and lengths
	TraceJSONL     = "jsonl"     // {"timestamp": s, "prompt_tokens": n, "output_tokens": n} per line
	TraceCSV       = "csv"       // timestamp,prompt_tokens,output_tokens with that header
	TraceAzure     = "azure"     // the Azure LLM inference trace: TIMESTAMP,ContextTokens,GeneratedTokens
	TraceMooncake  = "mooncake"  // {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]} per line
)

// MooncakeBlockTokens is how many prompt tokens one Mooncake hash id
// stands for (the trace's convention).
const MooncakeBlockTokens = 512

// maxTraceLine bounds one line of a text trace (a Mooncake line lists a
// hash id per 512 prompt tokens).
const maxTraceLine = 1 << 20

// maxTraceFile bounds a text trace, and maxTraceRequests the requests a
// trace of either kind may hold: a trace is held in memory (about 170 B a
// request, so a full one is about 170 MB).
const (
	maxTraceFile     = 1 << 30
	maxTraceRequests = 1_000_000
)

var errTooManyRequests = fmt.Errorf("more than %d requests, the most a trace may hold", maxTraceRequests)

// TraceRequest is one request of a trace.
type TraceRequest struct {
	At           time.Duration // when it is due, from the trace's first request
	PromptTokens int
	OutputTokens int
	// HashIDs name the prompt's blocks of BlockTokens tokens, in order
	// (Mooncake): requests with the same leading ids share that prefix.
	HashIDs []uint64
}

// Trace is a schedule of requests to replay, sorted by time.
type Trace struct {
	Format      string
	Requests    []TraceRequest
	BlockTokens int // tokens per hash id; 0 when the trace has none
}

// Duration is when the trace's last request is due.
func (t *Trace) Duration() time.Duration {
	if len(t.Requests) == 0 {
		return 0
	}
	return t.Requests[len(t.Requests)-1].At
}

// ShortestPrompt is the trace's shortest prompt; 0 for no trace.
func (t *Trace) ShortestPrompt() int {
	if t == nil {
		return 0
	}
	n := 0
	for i, r := range t.Requests {
		if i == 0 || r.PromptTokens < n {
			n = r.PromptTokens
		}
	}
	return n
}

// ReadTrace reads a trace file: a latscope recording, or a text trace in
// one of the formats above, told apart by its first line.
func ReadTrace(path string) (*Trace, error) {
	rec, err := recorder.Open(path)
	switch {
	case err == nil:
		defer rec.Close()
		t, err := traceFromRecording(rec)
		if err != nil {
			return nil, fmt.Errorf("trace %s: %w", path, err)
		}
		return t, nil
	case !errors.Is(err, recorder.ErrNotRecording) && !errors.Is(err, fileread.ErrNotRegular):
		return nil, fmt.Errorf("trace: %w", err)
	}
	// A path that is not a regular file is refused here, in the trace's name.
	f, err := fileread.Open(path, fileread.Limit{Flag: "trace", Max: maxTraceFile, What: "a text trace"})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ParseTrace(f)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return t, nil
}

// traceFromRecording takes the requests of a recording: when they were
// meant to be sent, the prompt length (as the server counted it) and the
// output length asked for. Warm-up requests are left out.
func traceFromRecording(rec *recorder.Reader) (*Trace, error) {
	t := &Trace{Format: TraceRecording}
	for {
		ev, err := rec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var torn *recorder.TornTailError
		if errors.As(err, &torn) {
			break // every complete frame was read: replay what there is
		}
		if err != nil {
			return nil, err
		}
		r := ev.Request
		if r == nil || r.Warmup || r.Intended.IsZero() {
			continue
		}
		out := r.TargetOutputTokens
		if out <= 0 {
			out = r.OutputTokens
		}
		if r.PromptTokens < 1 || out < 1 {
			continue // nothing to size it by
		}
		if len(t.Requests) == maxTraceRequests {
			return nil, errTooManyRequests
		}
		t.Requests = append(t.Requests, TraceRequest{At: time.Duration(r.Intended.UnixNano()), PromptTokens: r.PromptTokens, OutputTokens: out})
	}
	startAtZero(t.Requests)
	return t.finish()
}

// ParseTrace reads a text trace: JSON lines (latscope's or Mooncake's) or
// CSV with a header (latscope's or Azure's). An error names the line.
func ParseTrace(in io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxTraceLine)
	var t *Trace
	var parse func(line []byte) (TraceRequest, error)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if t == nil {
			var header bool
			t, parse, header = traceFormat(line)
			if t == nil {
				return nil, fmt.Errorf("line %d: not a trace: want JSON lines (latscope or Mooncake) or a CSV header (timestamp,prompt_tokens,output_tokens or Azure's TIMESTAMP,ContextTokens,GeneratedTokens), got %q", n, excerpt(line, 80))
			}
			if header {
				continue
			}
		}
		r, err := parse(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(t.Requests) == maxTraceRequests {
			return nil, fmt.Errorf("line %d: %w", n, errTooManyRequests)
		}
		t.Requests = append(t.Requests, r)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d bytes", n+1, maxTraceLine)
		}
		return nil, err
	}
	if t == nil {
		return nil, errors.New("no requests")
	}
	startAtZero(t.Requests)
	return t.finish()
}

// finish sorts the requests by time and checks there are some.
func (t *Trace) finish() (*Trace, error) {
	if len(t.Requests) == 0 {
		return nil, errors.New("no requests")
	}
	slices.SortStableFunc(t.Requests, func(a, b TraceRequest) int { return cmp.Compare(a.At, b.At) })
	if t.Format == TraceMooncake {
		t.BlockTokens = MooncakeBlockTokens
	}
	return t, nil
}

// startAtZero moves a trace's times so its first request is due at 0.
func startAtZero(rs []TraceRequest) {
	if len(rs) == 0 {
		return
	}
	first := rs[0].At
	for _, r := range rs {
		first = min(first, r.At)
	}
	for i := range rs {
		rs[i].At -= first
	}
}

// traceFormat tells the format from a trace's first line and returns its
// line parser; header says the line was a CSV header, not a request.
func traceFormat(line []byte) (t *Trace, parse func([]byte) (TraceRequest, error), header bool) {
	if line[0] == '{' {
		var keys map[string]json.RawMessage
		if json.Unmarshal(line, &keys) != nil {
			return &Trace{Format: TraceJSONL}, parseJSONLine, false // its error names the line
		}
		if _, ok := keys["input_length"]; ok {
			return &Trace{Format: TraceMooncake}, parseMooncakeLine, false
		}
		return &Trace{Format: TraceJSONL}, parseJSONLine, false
	}
	cols := strings.Split(strings.ToLower(string(line)), ",")
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	switch {
	case slices.Equal(cols, []string{"timestamp", "contexttokens", "generatedtokens"}):
		return &Trace{Format: TraceAzure}, parseAzureLine, true
	case slices.Equal(cols, []string{"timestamp", "prompt_tokens", "output_tokens"}):
		return &Trace{Format: TraceCSV}, parseCSVLine, true
	}
	return nil, nil, false
}

// jsonTraceLine is a line of latscope's JSONL trace.
type jsonTraceLine struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	PromptTokens *int            `json:"prompt_tokens"`
	OutputTokens *int            `json:"output_tokens"`
}

func parseJSONLine(line []byte) (TraceRequest, error) {
	var l jsonTraceLine
	if err := json.Unmarshal(line, &l); err != nil {
		return TraceRequest{}, fmt.Errorf("not a JSON object: %w", err)
	}
	at, err := parseTimestamp(l.Timestamp)
	if err != nil {
		return TraceRequest{}, err
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

func parseMooncakeLine(line []byte) (TraceRequest, error) {
	var l mooncakeLine
	if err := json.Unmarshal(line, &l); err != nil {
		return TraceRequest{}, fmt.Errorf("not a Mooncake trace line: %w", err)
	}
	if l.Timestamp == nil {
		return TraceRequest{}, errors.New("timestamp: missing")
	}
	at, err := seconds(*l.Timestamp / 1000)
	if err != nil {
		return TraceRequest{}, err
	}
	r, err := traceRequest(at, l.InputLength, l.OutputLength, "input_length", "output_length")
	if err != nil {
		return r, err
	}
	for i, id := range l.HashIDs {
		if id < 0 {
			return TraceRequest{}, fmt.Errorf("hash_ids[%d] %d: want 0 or more", i, id)
		}
		r.HashIDs = append(r.HashIDs, uint64(id))
	}
	return r, nil
}

// azureTime is the Azure trace's timestamp layout (fractions of a second,
// any number of digits, may follow).
const azureTime = "2006-01-02 15:04:05"

func parseAzureLine(line []byte) (TraceRequest, error) {
	f, err := csvFields(line, 3)
	if err != nil {
		return TraceRequest{}, err
	}
	t, err := time.Parse(azureTime, f[0])
	if err != nil {
		return TraceRequest{}, fmt.Errorf("TIMESTAMP %q: want a time like 2023-11-16 18:15:46.6805900", excerpt([]byte(f[0]), 40))
	}
	prompt, err := csvInt(f[1], "ContextTokens")
	if err != nil {
		return TraceRequest{}, err
	}
	out, err := csvInt(f[2], "GeneratedTokens")
	if err != nil {
		return TraceRequest{}, err
	}
	return traceRequest(time.Duration(t.UnixNano()), &prompt, &out, "ContextTokens", "GeneratedTokens")
}

func parseCSVLine(line []byte) (TraceRequest, error) {
	f, err := csvFields(line, 3)
	if err != nil {
		return TraceRequest{}, err
	}
	var at time.Duration
	if sec, err := strconv.ParseFloat(f[0], 64); err == nil {
		if at, err = seconds(sec); err != nil {
			return TraceRequest{}, err
		}
	} else if t, err := time.Parse(time.RFC3339Nano, f[0]); err == nil {
		at = time.Duration(t.UnixNano())
	} else {
		return TraceRequest{}, fmt.Errorf("timestamp %q: want seconds or an RFC 3339 time", excerpt([]byte(f[0]), 40))
	}
	prompt, err := csvInt(f[1], "prompt_tokens")
	if err != nil {
		return TraceRequest{}, err
	}
	out, err := csvInt(f[2], "output_tokens")
	if err != nil {
		return TraceRequest{}, err
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
func traceRequest(at time.Duration, prompt, output *int, promptName, outputName string) (TraceRequest, error) {
	switch {
	case prompt == nil:
		return TraceRequest{}, fmt.Errorf("%s: missing", promptName)
	case output == nil:
		return TraceRequest{}, fmt.Errorf("%s: missing", outputName)
	case *prompt < 1 || *prompt > maxTokenLength:
		return TraceRequest{}, fmt.Errorf("%s %d: want 1 to %d tokens", promptName, *prompt, maxTokenLength)
	case *output < 0 || *output > maxTokenLength:
		return TraceRequest{}, fmt.Errorf("%s %d: want 0 to %d tokens", outputName, *output, maxTokenLength)
	}
	return TraceRequest{At: at, PromptTokens: *prompt, OutputTokens: max(*output, 1)}, nil
}
