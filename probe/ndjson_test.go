package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
)

func readAllWireNDJSON(r io.Reader, limit int) ([]string, error) {
	clock := &readClock{r: r}
	rd := newNDJSONReader(bufio.NewReaderSize(clock, 16), clock, limit)
	var out []string
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(ev.Data))
	}
}

func TestNDJSONReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		want    []string
		wantErr error
	}{
		{"lines", "{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}, nil},
		{"crlf", "{\"a\":1}\r\n{\"b\":2}\r\n", []string{`{"a":1}`, `{"b":2}`}, nil},
		{"blank lines skipped", "\n{\"a\":1}\n\n  \n{\"b\":2}\n\n", []string{`{"a":1}`, `{"b":2}`}, nil},
		{"whole last line without newline", "{\"a\":1}\n{\"done\":true}", []string{`{"a":1}`, `{"done":true}`}, nil},
		{"cut last line", "{\"a\":1}\n{\"done\":tr", []string{`{"a":1}`}, io.ErrUnexpectedEOF},
		{"empty", "", nil, nil},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tt.input)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				got, err := readAllWireNDJSON(r, 0)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if strings.Join(got, "|") != strings.Join(tt.want, "|") {
					t.Errorf("got %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func TestNDJSONReaderLimit(t *testing.T) {
	t.Parallel()
	long := "{\"x\":\"" + strings.Repeat("x", 3*streamBufferBytes) + "\"}"
	if got, err := readAllWireNDJSON(strings.NewReader(long+"\n"), math.MaxInt); err != nil || len(got) != 1 {
		t.Fatalf("limit near the int limit: %d lines, err %v", len(got), err)
	}
	input := "{\"a\":1}\n{\"x\":\"" + strings.Repeat("x", 2000) + "\"}\n{\"b\":2}\n"
	got, err := readAllWireNDJSON(strings.NewReader(input), 1024)
	var tooLarge *eventTooLargeError
	if !errors.As(err, &tooLarge) || err.Error() != "event exceeds 1024 bytes" {
		t.Fatalf("err = %v", err)
	}
	if len(got) != 1 {
		t.Errorf("lines before the big one: %q", got)
	}
}

func FuzzNDJSON(f *testing.F) {
	for _, s := range []string{"{\"a\":1}\n", "\n\n{}\r\n", "{\"done\":true}", "{\"x\":", " \t\n"} {
		f.Add([]byte(s), false)
	}
	const limit = 256
	f.Fuzz(func(t *testing.T, input []byte, oneByte bool) {
		var r io.Reader = bytes.NewReader(input)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		got, err := readAllWireNDJSON(r, limit)
		for _, line := range got {
			if len(line) > limit {
				t.Fatalf("line of %d bytes passed the %d limit", len(line), limit)
			}
		}
		var tooLarge *eventTooLargeError
		switch {
		case err == nil, errors.Is(err, io.ErrUnexpectedEOF):
		case errors.As(err, &tooLarge):
			return
		default:
			t.Fatalf("unexpected error %v", err)
		}
		// Oracle: split on \n, trim, skip blanks; a last unterminated line
		// counts only if it is valid JSON.
		parts := strings.Split(string(input), "\n")
		var want []string
		var wantErr error
		for i, p := range parts {
			p = string(bytes.TrimSpace([]byte(p)))
			if p == "" {
				continue
			}
			if i == len(parts)-1 && !json.Valid([]byte(p)) {
				wantErr = io.ErrUnexpectedEOF
				break
			}
			want = append(want, p)
		}
		if !errors.Is(err, wantErr) || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("input %q: got %q (%v), want %q (%v)", input, got, err, want, wantErr)
		}
	})
}
