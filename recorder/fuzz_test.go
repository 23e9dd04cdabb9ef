package recorder

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
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
	if !errors.As(err, &torn) && !errors.As(err, &corrupt) && !errors.Is(err, ErrNotRecording) && !errors.Is(err, ErrVersion) {
		t.Fatalf("undocumented error %T: %v", err, err)
	}
}
