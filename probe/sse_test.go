package probe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
)

type wireSSEEvent struct{ data, typ, id string }

// readAllWireSSE parses input through r (which may split reads) and returns the
// events and the final error (nil at a clean io.EOF).
func readAllWireSSE(r io.Reader, limit int) ([]wireSSEEvent, error) {
	clock := &readClock{r: r}
	rd := newSSEReader(bufio.NewReaderSize(clock, 16), clock, limit)
	var out []wireSSEEvent
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, wireSSEEvent{string(ev.Data), string(ev.Type), string(ev.ID)})
	}
}

func TestSSEReaderRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  []wireSSEEvent
	}{
		{"lf", "data: a\n\ndata: b\n\n", []wireSSEEvent{{data: "a"}, {data: "b"}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []wireSSEEvent{{data: "a"}, {data: "b"}}},
		{"cr", "data: a\r\rdata: b\r\r", []wireSSEEvent{{data: "a"}, {data: "b"}}},
		{"mixed line ends", "data: a\r\n\rdata: b\n\r\n", []wireSSEEvent{{data: "a"}, {data: "b"}}},
		{"no space after colon", "data:{\"x\":1}\n\n", []wireSSEEvent{{data: `{"x":1}`}}},
		{"only one space stripped", "data:  two\n\n", []wireSSEEvent{{data: " two"}}},
		{"comments ignored", ": keep-alive\ndata: a\n: mid\n\n:only comment\n\n", []wireSSEEvent{{data: "a"}}},
		{"multi-line data", "data: first\ndata:\ndata: third\n\n", []wireSSEEvent{{data: "first\n\nthird"}}},
		{"event and id", "event: delta\ndata: {\"a\":1}\nid: 42\n\n", []wireSSEEvent{{data: `{"a":1}`, typ: "delta", id: "42"}}},
		{"id persists, type does not", "event: x\nid: 7\ndata: a\n\ndata: b\n\n", []wireSSEEvent{{"a", "x", "7"}, {"b", "", "7"}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []wireSSEEvent{{"a", "", "1"}, {"b", "", "1"}}},
		{"bom", "\xef\xbb\xbfdata: a\n\n", []wireSSEEvent{{data: "a"}}},
		{"bom only at start", "data: a\n\n\xef\xbb\xbfdata: b\n\n", []wireSSEEvent{{data: "a"}}},
		{"field without colon", "data\n\n", []wireSSEEvent{{data: ""}}},
		{"unknown fields and retry ignored", "retry: 10\nfoo: bar\ndata: a\n\n", []wireSSEEvent{{data: "a"}}},
		{"empty event not dispatched", "event: x\n\ndata: a\n\n", []wireSSEEvent{{data: "a"}}},
		{"last event without blank line discarded", "data: a\n\ndata: b\n", []wireSSEEvent{{data: "a"}}},
		{"partial last line discarded", "data: a\n\ndata: b", []wireSSEEvent{{data: "a"}}},
		{"done marker", "data: {\"x\":1}\n\ndata: [DONE]\n\n", []wireSSEEvent{{data: `{"x":1}`}, {data: "[DONE]"}}},
		{"leading blank lines", "\n\n\ndata: a\n\n", []wireSSEEvent{{data: "a"}}},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := readAllWireSSE(mk(tt.input), 0)
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				if !equalWireEvents(got, tt.want) {
					t.Errorf("got %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func equalWireEvents(a, b []wireSSEEvent) bool {
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

func TestSSEReaderLimit(t *testing.T) {
	t.Parallel()
	big := "data: " + strings.Repeat("x", 2000) + "\n\n"
	multi := strings.Repeat("data: "+strings.Repeat("y", 300)+"\n", 5) + "\n"
	for _, tt := range []struct{ name, input string }{{"one long line", big}, {"many data lines", multi}} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAllWireSSE(strings.NewReader("data: ok\n\n"+tt.input+"data: after\n\n"), 1024)
			var tooLarge *eventTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("err = %v, want eventTooLargeError", err)
			}
			if err.Error() != "event exceeds 1024 bytes" {
				t.Errorf("message %q", err.Error())
			}
			if len(got) != 1 || got[0].data != "ok" {
				t.Errorf("events before the big one: %q", got)
			}
		})
	}
	t.Run("default limit", func(t *testing.T) {
		input := "data: " + strings.Repeat("z", DefaultMaxEventBytes) + "\n\n"
		_, err := readAllWireSSE(strings.NewReader(input), 0)
		if err == nil || err.Error() != "event exceeds 1048576 bytes" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("limit near the int limit", func(t *testing.T) {
		// A line spanning buffer refills once made limit+slack wrap.
		data := strings.Repeat("v", 3*streamBufferBytes)
		got, err := readAllWireSSE(strings.NewReader("data: "+data+"\n\n"), math.MaxInt)
		if err != nil || len(got) != 1 || got[0].data != data {
			t.Fatalf("got %d events, err %v", len(got), err)
		}
	})
	t.Run("just under the limit", func(t *testing.T) {
		data := strings.Repeat("w", 1023) // plus the joining \n: 1024
		got, err := readAllWireSSE(strings.NewReader("data: "+data+"\n\n"), 1024)
		if err != nil || len(got) != 1 || got[0].data != data {
			t.Fatalf("got %d events, err %v", len(got), err)
		}
	})
}

// wireChunkedReader returns its parts one per Read.
type wireChunkedReader struct{ parts []string }

func (c *wireChunkedReader) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	if c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func TestSSEReaderReadNumbers(t *testing.T) {
	t.Parallel()
	// Three events in the first read, one split over reads 2 and 3, one in read 4.
	src := &wireChunkedReader{parts: []string{
		"data: a\n\ndata: b\n\ndata: c\n\n",
		"data: d",
		"\n\n",
		"data: e\n\n",
	}}
	clock := &readClock{r: src}
	rd := newSSEReader(bufio.NewReaderSize(clock, 4096), clock, 0)
	var got []uint64
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		if ev.At.IsZero() {
			t.Fatal("event without arrival time")
		}
		got = append(got, ev.Read)
	}
	want := []uint64{1, 1, 1, 3, 4}
	if len(got) != len(want) {
		t.Fatalf("reads %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("reads %v, want %v", got, want)
		}
	}
}

// refWireSSE is a direct, slow transcription of the WHATWG parsing rules, the
// oracle for FuzzSSE.
func refWireSSE(s string) []wireSSEEvent {
	s = strings.TrimPrefix(s, "\xef\xbb\xbf") // a leading BOM
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
	var out []wireSSEEvent
	var data, typ, id string
	hasData := false
	for _, line := range lines {
		if line == "" {
			if hasData {
				out = append(out, wireSSEEvent{strings.TrimSuffix(data, "\n"), typ, id})
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
				id = value
			}
		}
	}
	return out
}

func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "data:b\r\n\r\n", "data: a\rdata: b\r\r", "\xef\xbb\xbfdata: x\n\n",
		": c\nevent: e\nid: 1\ndata: 1\ndata: 2\n\n", "data: [DONE]\n\n", "data\n\n", "id: \x00\n",
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
		got, err := readAllWireSSE(r, limit)
		for _, ev := range got {
			if len(ev.data) >= limit {
				t.Fatalf("event of %d bytes passed the %d limit", len(ev.data), limit)
			}
		}
		var tooLarge *eventTooLargeError
		if err != nil && !errors.As(err, &tooLarge) {
			t.Fatalf("unexpected error %v", err)
		}
		if err != nil {
			return // the oracle has no limit
		}
		want := refWireSSE(string(input))
		if !equalWireEvents(got, want) {
			t.Fatalf("input %q:\n got %q\nwant %q", input, got, want)
		}
	})
}

func BenchmarkSSEReader(b *testing.B) {
	ev := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767000000,"model":"m","choices":[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	const events = 1000
	stream := []byte(strings.Repeat(ev, events))
	src := bytes.NewReader(stream)
	clock := &readClock{r: src}
	br := bufio.NewReaderSize(clock, streamBufferBytes)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		src.Reset(stream)
		br.Reset(clock)
		rd := newSSEReader(br, clock, 0)
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// BenchmarkBufioLines is the floor BenchmarkSSEReader is compared with: a
// bare bufio line reader over the same stream.
func BenchmarkBufioLines(b *testing.B) {
	ev := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767000000,"model":"m","choices":[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	const events = 1000
	stream := []byte(strings.Repeat(ev, events))
	src := bytes.NewReader(stream)
	br := bufio.NewReaderSize(src, streamBufferBytes)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(stream)
		br.Reset(src)
		for {
			if _, err := br.ReadSlice('\n'); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
