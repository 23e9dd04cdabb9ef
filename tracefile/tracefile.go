// Package tracefile reads a trace file into the schedule the probe replays
// (probe.Trace, for --trace): a latscope recording, whose requests' intended
// times and lengths it takes, or a text trace, latscope's JSON lines or
// CSV, or a published one (Azure's LLM inference trace, Mooncake's). It
// stands between the recorder and the probe, so that the probe, a source,
// never reads a recording, an outlet's file.
package tracefile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/probe"
	"github.com/latscope/latscope/recorder"
)

// The trace formats Read knows, as probe.Trace.Format names them.
const (
	Recording = "recording" // a latscope recording: its requests' intended times and lengths
	JSONL     = "jsonl"     // {"timestamp": s, "prompt_tokens": n, "output_tokens": n} per line
	CSV       = "csv"       // timestamp,prompt_tokens,output_tokens with that header
	Azure     = "azure"     // the Azure LLM inference trace: TIMESTAMP,ContextTokens,GeneratedTokens
	Mooncake  = "mooncake"  // {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]} per line
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

// Read reads a trace file: a latscope recording, or a text trace in one of
// the formats above, told apart by its first line.
func Read(path string) (*probe.Trace, error) {
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
	t, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return t, nil
}

// traceFromRecording takes the requests of a recording: when they were
// meant to be sent, the prompt length (as the server counted it) and the
// output length asked for. Warm-up requests are left out.
func traceFromRecording(rec *recorder.Reader) (*probe.Trace, error) {
	t := &probe.Trace{Format: Recording}
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
		if r == nil || r.Warmup || r.Intended.IsZero() || r.HasFlag(event.FlagServerReported) {
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
		t.Requests = append(t.Requests, probe.TraceRequest{At: time.Duration(r.Intended.UnixNano()), PromptTokens: r.PromptTokens, OutputTokens: out})
	}
	startAtZero(t.Requests)
	return finish(t)
}

// Parse reads a text trace: JSON lines (latscope's or Mooncake's) or CSV
// with a header (latscope's or Azure's). An error names the line.
func Parse(in io.Reader) (*probe.Trace, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxTraceLine)
	var t *probe.Trace
	var parse func(line []byte) (probe.TraceRequest, error)
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
	return finish(t)
}

// finish sorts the requests by time and checks there are some.
func finish(t *probe.Trace) (*probe.Trace, error) {
	if len(t.Requests) == 0 {
		return nil, errors.New("no requests")
	}
	slices.SortStableFunc(t.Requests, func(a, b probe.TraceRequest) int { return cmp.Compare(a.At, b.At) })
	if t.Format == Mooncake {
		t.BlockTokens = MooncakeBlockTokens
	}
	return t, nil
}

// startAtZero moves a trace's times so its first request is due at 0.
func startAtZero(rs []probe.TraceRequest) {
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
func traceFormat(line []byte) (t *probe.Trace, parse func([]byte) (probe.TraceRequest, error), header bool) {
	if line[0] == '{' {
		var keys map[string]json.RawMessage
		if json.Unmarshal(line, &keys) != nil {
			return &probe.Trace{Format: JSONL}, parseJSONLine, false // its error names the line
		}
		if _, ok := keys["input_length"]; ok {
			return &probe.Trace{Format: Mooncake}, parseMooncakeLine, false
		}
		return &probe.Trace{Format: JSONL}, parseJSONLine, false
	}
	cols := strings.Split(strings.ToLower(string(line)), ",")
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	switch {
	case slices.Equal(cols, []string{"timestamp", "contexttokens", "generatedtokens"}):
		return &probe.Trace{Format: Azure}, parseAzureLine, true
	case slices.Equal(cols, []string{"timestamp", "prompt_tokens", "output_tokens"}):
		return &probe.Trace{Format: CSV}, parseCSVLine, true
	}
	return nil, nil, false
}
