package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type event struct {
	data, typ, id string
	hasID         bool
}

// readAll parses input through a Reader over r (which may split reads)
// with a small buffer, so lines span refills, and returns the events and
// the final error (nil at a clean io.EOF).
func readAll(r io.Reader, limit int) ([]event, *Reader, error) {
	rd := NewReader(bufio.NewReaderSize(r, 16), limit)
	var out []event
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, rd, nil
		}
		if err != nil {
			return out, rd, err
		}
		out = append(out, event{string(ev.Data), string(ev.Type), string(ev.ID), ev.HasID})
	}
}

func TestReaderRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, input string
		want        []event
	}{
		{"lf", "data: a\n\ndata: b\n\n", []event{{data: "a"}, {data: "b"}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []event{{data: "a"}, {data: "b"}}},
		{"cr", "data: a\r\rdata: b\r\r", []event{{data: "a"}, {data: "b"}}},
		{"no space after colon", "data:{\"x\":1}\n\n", []event{{data: `{"x":1}`}}},
		{"only one space stripped", "data:  two\n\n", []event{{data: " two"}}},
		{"comments", ": keep-alive\ndata: a\n: mid\n\n:only comment\n\n", []event{{data: "a"}}},
		{"multi-line data", "data: first\ndata:\ndata: third\n\n", []event{{data: "first\n\nthird"}}},
		{"named event", "event: response.output_text.delta\ndata: {}\n\n", []event{{data: "{}", typ: "response.output_text.delta"}}},
		{"id persists, type does not", "event: x\nid: 7\ndata: a\n\ndata: b\n\n",
			[]event{{"a", "x", "7", true}, {"b", "", "7", true}}},
		{"empty id is an id", "id\ndata: a\n\n", []event{{data: "a", hasID: true}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []event{{"a", "", "1", true}, {"b", "", "1", true}}},
		{"bom", "\xef\xbb\xbfdata: a\n\n", []event{{data: "a"}}},
		{"bom only at start", "data: a\n\n\xef\xbb\xbfdata: b\n\n", []event{{data: "a"}}},
		{"field without colon", "data\n\n", []event{{data: ""}}},
		{"retry and unknown fields", "retry: 10\nfoo: bar\ndata: a\n\n", []event{{data: "a"}}},
		{"type without data not dispatched", "event: x\n\ndata: a\n\n", []event{{data: "a"}}},
		{"cut-off event discarded", "data: a\n\ndata: b\n", []event{{data: "a"}}},
		{"partial line discarded", "data: a\n\ndata: b", []event{{data: "a"}}},
	} {
		got, _, err := readAll(strings.NewReader(tc.input), 0)
		if err != nil || !equal(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestReaderRefusesOversizedEvents(t *testing.T) {
	t.Parallel()
	for _, stream := range []string{
		"data: " + strings.Repeat("x", 2000) + "\n\n",
		strings.Repeat("data: "+strings.Repeat("x", 100)+"\n", 20) + "\n",
		strings.Repeat("x", 5000),
	} {
		_, _, err := readAll(strings.NewReader(stream), 1000)
		var tooLarge *TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Limit != 1000 || !errors.Is(err, ErrTooLarge) {
			t.Errorf("%.20q...: %v, want a TooLargeError of 1000", stream, err)
		}
	}
	if got := NewReader(bufio.NewReader(strings.NewReader("")), 1<<40).limit; got != MaxLimit {
		t.Errorf("limit %d, want MaxLimit", got)
	}
}

// countingReader counts the reads that returned data.
type countingReader struct {
	parts []string
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	if c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	c.reads++
	return n, nil
}

// The probe stamps each event with the latest read: the reader must not
// read ahead of an event it can already dispatch.
func TestReaderReadsOnlyWhenNothingIsBuffered(t *testing.T) {
	t.Parallel()
	src := &countingReader{parts: []string{"data: a\n\nevent: t\ndata: b\n\n", "data: c", "\n\n", "data: d\r", "\ndata: e\n\n"}}
	rd := NewReader(bufio.NewReaderSize(src, 4096), 0)
	var got []int
	for {
		if _, err := rd.Next(); err != nil {
			break
		}
		got = append(got, src.reads)
	}
	// d's line ends in a CR, so the reader reads on to see whether an LF
	// follows; d and e are one event, dispatched at the blank line of the
	// fifth read.
	want := []int{1, 1, 3, 5}
	if !slicesEqual(got, want) {
		t.Errorf("events came after reads %v, want %v", got, want)
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equal(a, b []event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// reference is a direct, slow transcription of the WHATWG parsing rules,
// the fuzz oracle.
func reference(s string) []event {
	s = strings.TrimPrefix(s, utf8BOM)
	var lines []string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break // an unterminated last line is not a line
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	var out []event
	var data, typ, id string
	hasData, hasID := false, false
	for _, line := range lines {
		if line == "" {
			if hasData {
				out = append(out, event{strings.TrimSuffix(data, "\n"), typ, id, hasID})
			}
			data, typ, hasData = "", "", false
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data += value + "\n"
			hasData = true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				id, hasID = value, true
			}
		}
	}
	return out
}

// FuzzReader checks the reader against the reference over whole, byte by
// byte and halved reads, that no event passes the limit, that the only
// error is a TooLargeError, and that the buffers stay within the bound.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "data:b\r\n\r\n", "data: a\rdata: b\r\r", "\xef\xbb\xbfdata: x\n\n",
		": c\nevent: e\nid: 1\ndata: 1\ndata: 2\n\n", "data: [DONE]\n\n", "data\n\n", "id: \x00\n", "id\ndata: x\n\n",
		"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n",
	} {
		f.Add([]byte(s), uint8(0))
	}
	const limit = 256
	f.Fuzz(func(t *testing.T, input []byte, mode uint8) {
		var r io.Reader = bytes.NewReader(input)
		switch mode % 3 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.HalfReader(r)
		}
		got, rd, err := readAll(r, limit)
		for _, ev := range got {
			if len(ev.data) >= limit {
				t.Fatalf("event of %d bytes passed the %d limit", len(ev.data), limit)
			}
		}
		if line, data := rd.BufferCaps(); line > 3*limit || data > 3*limit {
			t.Fatalf("buffers grew to %d and %d bytes for a %d-byte limit", line, data, limit)
		}
		if err != nil {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return // the oracle has no limit
		}
		if want := reference(string(input)); !equal(got, want) {
			t.Fatalf("input %q:\n got %+v\nwant %+v", input, got, want)
		}
	})
}
