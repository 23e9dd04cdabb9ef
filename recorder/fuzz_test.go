package recorder

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// FuzzReader feeds the reader random bytes and damaged recordings: it must
// never panic, stop in bounded time, and fail only with the errors it
// documents.
func FuzzReader(f *testing.F) {
	rec := smallRecording(f)
	f.Add(rec.data)
	f.Add(rec.data[:len(rec.data)/2])
	f.Add(rec.data[:rec.frames[0]])
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		damaged := bytes.Clone(rec.data)
		damaged[rng.IntN(len(damaged))] = byte(rng.Uint32())
		f.Add(damaged)
	}
	noise := make([]byte, 512)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	f.Add(noise)
	f.Add(append(bytes.Clone(rec.data[:rec.frames[1]]), noise...))
	// Every event again, then a second session header.
	again := append(rec.all()[1:], rec.all()[0])
	f.Add(append(bytes.Clone(rec.data), rawFrame(f, again...)...))

	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			checkDocumented(t, err)
			return
		}
		defer r.Close()
		// Far more events than a fuzzed input can hold, compressed or not.
		for range 1 << 20 {
			if _, err := r.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					checkDocumented(t, err)
				}
				if _, again := r.Next(); again == nil || again.Error() != err.Error() {
					t.Fatalf("Next after %v returned %v", err, again)
				}
				return
			}
		}
		t.Fatal("reader did not stop")
	})
}

func checkDocumented(t *testing.T, err error) {
	t.Helper()
	var torn *TornTailError
	var corrupt *CorruptError
	var session *SessionError
	if !errors.As(err, &torn) && !errors.As(err, &corrupt) && !errors.As(err, &session) && !errors.Is(err, ErrNotRecording) && !errors.Is(err, ErrVersion) {
		t.Fatalf("undocumented error %T: %v", err, err)
	}
}

// FuzzDuplicates writes recordings whose request events repeat in the
// order and the frames the input says: the reader must return each request
// once, in the order of its first copy, every other event as written, and
// count exactly the copies it dropped. (Repeats here lie within the
// reader's window.)
func FuzzDuplicates(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0, 1, 2, 3})
	f.Add([]byte{0, 0, 0x80, 0, 0xff, 1, 1, 0x41})
	f.Add([]byte{5, 0x85, 3, 0x43, 5, 5, 0xc5})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 4096 {
			return
		}
		// Each byte is one event: its low 5 bits pick the request (or a
		// marker, for 31), bit 6 ends the frame after it, bit 7 writes the
		// request's copy with a different payload (a resent record may
		// differ; the id is what names the request).
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		var want []event.Event
		var dropped int64
		for i, b := range script {
			ev := fuzzEvent(int(b&0x1f), i, b&0x80 != 0)
			if err := w.Write(ev); err != nil {
				t.Fatal(err)
			}
			if k := int(b & 0x1f); ev.Request != nil && seen[k] {
				dropped++
			} else {
				seen[k] = true
				want = append(want, ev)
			}
			if b&0x40 != 0 {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got []event.Event
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Session == nil {
				got = append(got, ev)
			}
		}
		sameEvents(t, got, want)
		if r.Duplicates() != dropped {
			t.Fatalf("Duplicates = %d, want %d", r.Duplicates(), dropped)
		}
	})
}

// fuzzEvent is request k (a marker for k = 31), the i-th event written.
func fuzzEvent(k, i int, altered bool) event.Event {
	at := t0.Add(time.Duration(i) * time.Millisecond)
	if k == 31 {
		return event.NewMarker(&event.Marker{Time: at, Kind: event.MarkerStall, Source: "fuzz"})
	}
	r := &event.Request{ID: fmt.Sprintf("ls-ab12-%d", k), Seq: uint64(k), Dialect: "openai-chat",
		Intended: at, Start: at, TTFT: 80 * time.Millisecond, Outcome: event.OutcomeOK}
	if altered {
		r.TTFT++
	}
	return event.NewRequest(r)
}
