package textsafe

import (
	"io"
	"unicode/utf8"
)

// Writer escapes what is written through it as Terminal does: for a
// stream of text a terminal shows, such as latscope's stderr (status
// lines, warnings that quote a server or an agent) or a text summary on
// stdout. Wrapping the command's stderr once keeps every line written to
// it safe, whoever wrote it.
//
// A character split across two writes (a bufio.Writer's buffer boundary)
// is held back until the next write completes it, so the output is what
// Terminal makes of everything written together; Flush writes what is
// held at the end (a character cut short, escaped). Not for JSON, which
// textsafe.JSON keeps decodable, nor for a dashboard's own escape
// sequences. Not safe for concurrent use.
type Writer struct {
	w    io.Writer
	held [utf8.UTFMax - 1]byte
	n    int // bytes in held
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it, and returns len(p) unless w failed.
func (w *Writer) Write(p []byte) (int, error) {
	data := p
	if w.n > 0 {
		data = append(w.held[:w.n:w.n], p...)
		w.n = 0
	}
	keep := incompleteTail(data)
	body := data[:len(data)-keep]
	w.n = copy(w.held[:], data[len(data)-keep:])
	if len(body) == 0 {
		return len(p), nil
	}
	if firstUnsafe(string(body), multiLine) >= 0 {
		body = []byte(escape(string(body), multiLine))
	}
	if _, err := w.w.Write(body); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the bytes held back from the last Write, a character cut
// short, escaped.
func (w *Writer) Flush() error {
	if w.n == 0 {
		return nil
	}
	held := escape(string(w.held[:w.n]), multiLine)
	w.n = 0
	_, err := io.WriteString(w.w, held)
	return err
}

// incompleteTail is how many bytes at the end of b are the start of a
// valid UTF-8 sequence that b cuts short: 0 to 3.
func incompleteTail(b []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		c := b[len(b)-k]
		switch {
		case c < utf8.RuneSelf:
			return 0
		case utf8.RuneStart(c):
			if utf8.FullRune(b[len(b)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}
