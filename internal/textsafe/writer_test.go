package textsafe_test

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/internal/textsafe/hostile"
)

// TestWriterEscapesEveryLine: lines written through a Writer, whole or
// through a small bufio.Writer that cuts characters in two, come out as
// Terminal makes them.
func TestWriterEscapesEveryLine(t *testing.T) {
	t.Parallel()
	var text strings.Builder
	for _, c := range hostile.All() {
		fmt.Fprintf(&text, "latscope: http 500: %s · café ✓\n", c.Text)
	}
	want := textsafe.Terminal(text.String())
	for _, size := range []int{16, 17, 4096} {
		var out strings.Builder
		w := textsafe.NewWriter(&out)
		bw := bufio.NewWriterSize(w, size)
		if _, err := bw.WriteString(text.String()); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("through a %d-byte buffer:\n got %q\nwant %q", size, out.String(), want)
		}
	}
}

func TestWriterCountsWhatItWasGiven(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	w := textsafe.NewWriter(&out)
	for _, p := range []string{"\x1b]0;x\x07", "caf\xc3", "\xa9\n", "\xe2\x80"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", p, n, err, len(p))
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := `\x1b]0;x\x07café` + "\n" + `\xe2\x80`; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
	if n, err := textsafe.NewWriter(failing{}).Write([]byte("x")); n != 0 || err == nil {
		t.Errorf("a failing writer: %d, %v; want 0 and its error", n, err)
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// FuzzWriter: however the text is cut into writes, the Writer writes what
// Terminal makes of it whole.
func FuzzWriter(f *testing.F) {
	for _, c := range hostile.All() {
		f.Add([]byte(c.Text), uint8(1), uint8(3))
	}
	f.Add([]byte("日本\xe2\x80\xae\u009b"), uint8(2), uint8(4))
	f.Fuzz(func(t *testing.T, b []byte, a, c uint8) {
		cuts := []int{int(a) % (len(b) + 1), int(c) % (len(b) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		var out strings.Builder
		w := textsafe.NewWriter(&out)
		for _, p := range [][]byte{b[:cuts[0]], b[cuts[0]:cuts[1]], b[cuts[1]:]} {
			if n, err := w.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if want := textsafe.Terminal(string(b)); out.String() != want {
			t.Fatalf("%q cut at %v: wrote %q, want %q", b, cuts, out.String(), want)
		}
	})
}
