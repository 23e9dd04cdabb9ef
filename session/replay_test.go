package session

import (
	"context"
	"testing"
	"time"

	"github.com/latscope/latscope/internal/testutil"
	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/tui"
)

// A replay's frames say where the playhead is, how long the recording is,
// the speed, and, once it has played through, that it finished.
func TestReplayFeedSaysWhereItIsAndWhenItEnds(t *testing.T) {
	rec := testutil.TinyRecording(t, t.TempDir(), "a.lsr")
	var pass *replayPass
	scanned := make(chan struct{})
	f := tui.NewReplayFeed(context.Background(), recorder.MaxSpeed,
		func(ctx context.Context, from time.Time, paused bool) tui.ReplayPass {
			pass = startReplayPass(ctx, rec, recorder.MaxSpeed, from, paused)
			return pass
		},
		func(ctx context.Context) (time.Time, time.Time, error) {
			defer close(scanned)
			return recordingSpan(ctx, rec)
		})
	for what, done := range map[string]chan struct{}{"the pass": pass.done, "the length scan": scanned} {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			f.Close()
			t.Fatalf("%s did not end within 30 s", what)
		}
	}
	f.Close() // waits until the feed holds the span the scan read
	fr, _ := f.Frame()
	pb := fr.Playback
	if pb == nil || !fr.Finished {
		t.Fatalf("playback %+v, finished %v; want both", pb, fr.Finished)
	}
	// The recording's requests start once a second for 29 s and end 120 ms
	// or so later: the playhead ends at the last, which is the length.
	if pb.Length < 29*time.Second || pb.Length > 30*time.Second || pb.Position != pb.Length || pb.Speed != recorder.MaxSpeed {
		t.Fatalf("position %v of %v at speed %v; want the end of a 29 s recording", pb.Position, pb.Length, pb.Speed)
	}
}
