package textsafe

import (
	"io"
	"sync"
)

// Shared is a Writer shared by the goroutines that write to one stream
// (status lines, warnings, a summary).
type Shared struct {
	mu  sync.Mutex
	w   *Writer
	out io.Writer // what w writes to
}

// NewShared escapes what it is given and writes it to w.
func NewShared(w io.Writer) *Shared { return &Shared{w: NewWriter(w), out: w} }

func (s *Shared) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Flush writes a character cut short at the end, escaped.
func (s *Shared) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Flush()
}

// Out is the writer behind the escaping (a terminal, say).
func (s *Shared) Out() io.Writer { return s.out }
