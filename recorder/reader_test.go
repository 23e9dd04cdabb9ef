package recorder

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/latscope/latscope/event"
)

func smallRecording(t testing.TB) *recording {
	evs := everyKind(t0)
	return buildRecording(t, evs[:3], evs[3:6], evs[6:])
}

// TestTruncatedAtEveryOffset cuts a recording at every byte: the reader never
// panics, returns the events of the complete frames before the cut, and
// names the torn frame's offset (or ends cleanly at a frame boundary).
func TestTruncatedAtEveryOffset(t *testing.T) {
	t.Parallel()
	rec := smallRecording(t)
	all := rec.all()
	for n := 0; n < len(rec.data); n++ {
		got, err := readAll(rec.data[:n])
		if !isPrefix(got, all) {
			t.Fatalf("cut at %d: the %d events read are not a prefix of the recording", n, len(got))
		}
		if n == 0 {
			if !errors.Is(err, ErrNotRecording) {
				t.Fatalf("empty file: got %v, want ErrNotRecording", err)
			}
			continue
		}
		frame, frameAt := frameAround(rec, int64(n))
		want := countEvents(rec, max(frame-1, 0)) // the data frames before the cut's
		if int64(n) == frameAt && frame >= 2 {
			// A cut between frames, after the session header's, leaves a
			// shorter recording that is whole.
			if err != nil || len(got) != want {
				t.Fatalf("cut at frame boundary %d: %d events, %v; want %d, no error", n, len(got), err, want)
			}
			continue
		}
		var torn *TornTailError
		if !errors.As(err, &torn) {
			t.Fatalf("cut at %d: got %v, want a *TornTailError", n, err)
		}
		if torn.Offset != frameAt || torn.Size != int64(n)-frameAt {
			t.Fatalf("cut at %d: torn tail at %d (%d bytes), want at %d (%d bytes)", n, torn.Offset, torn.Size, frameAt, int64(n)-frameAt)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("offset %d", frameAt)) {
			t.Fatalf("cut at %d: %q does not name offset %d", n, err, frameAt)
		}
		if len(got) != want {
			t.Fatalf("cut at %d: read %d events, want the %d of the complete frames", n, len(got), want)
		}
	}
}

// frameAround returns which frame holds byte off (0 is the file header, 1
// the session header's frame, 2 the first frame of events) and where that
// frame begins.
func frameAround(rec *recording, off int64) (frame int, frameAt int64) {
	starts := append([]int64{0}, rec.frames...)
	for i, start := range starts {
		if start <= off {
			frame, frameAt = i, start
		}
	}
	return frame, frameAt
}

func countEvents(rec *recording, frames int) int {
	n := 0
	for _, evs := range rec.events[:frames] {
		n += len(evs)
	}
	return n
}

func TestCorruptByteNamesTheFrame(t *testing.T) {
	t.Parallel()
	rec := smallRecording(t)
	second := rec.frames[2]
	data := bytes.Clone(rec.data)
	mid := (second + rec.frames[3]) / 2
	data[mid] ^= 0xFF

	got, err := readAll(data)
	var corrupt *CorruptError
	if !errors.As(err, &corrupt) {
		t.Fatalf("got %v, want a *CorruptError", err)
	}
	if corrupt.Offset != second || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", second)) {
		t.Errorf("error %q, want it to name offset %d", err, second)
	}
	sameEvents(t, got, rec.all()[:countEvents(rec, 2)])
}

// TestCorruptedAtEveryOffset flips each byte in turn: the reader never
// panics, never returns an event that was not written, and never reports a
// damaged file as whole.
func TestCorruptedAtEveryOffset(t *testing.T) {
	t.Parallel()
	rec := smallRecording(t)
	all := rec.all()
	for i := range rec.data {
		data := bytes.Clone(rec.data)
		data[i] ^= 0xFF
		got, err := readAll(data)
		if !isPrefix(got, all) {
			t.Fatalf("byte %d flipped: the %d events read are not a prefix of the recording", i, len(got))
		}
		if err == nil {
			t.Fatalf("byte %d flipped: read %d events and no error", i, len(got))
		}
	}
}

func TestLargeRecordingStreams(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	var groups [][]event.Event
	for g := range 20 {
		var evs []event.Event
		for i := range 50 {
			seq := uint64(g*50 + i)
			evs = append(evs, event.NewRequest(realisticRequest(rng, t0.Add(time.Duration(seq)*time.Millisecond), seq)))
		}
		groups = append(groups, evs)
	}
	rec := buildRecording(t, groups...)
	got, err := readAll(rec.data)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, rec.all())
}

// TestOversizedFrameRefused checks the bound on a frame's decompressed size:
// a frame that would expand beyond MaxFrameBytes is reported, not decoded.
func TestOversizedFrameRefused(t *testing.T) {
	t.Parallel()
	rec := smallRecording(t)
	line, err := event.Marshal(everyKind(t0)[4])
	if err != nil {
		t.Fatal(err)
	}
	line = append(line, '\n')
	huge := bytes.Repeat(line, MaxFrameBytes/len(line)+1)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	data := enc.EncodeAll(huge, bytes.Clone(rec.data))

	got, err := readAll(data)
	var corrupt *CorruptError
	if !errors.As(err, &corrupt) || corrupt.Offset != int64(len(rec.data)) {
		t.Fatalf("got %v, want a *CorruptError at offset %d", err, len(rec.data))
	}
	sameEvents(t, got, rec.all())
}
