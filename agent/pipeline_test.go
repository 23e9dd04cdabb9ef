package agent

import (
	"context"
	"testing"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// TestAgentAndAttachAsPipelineEnds wires the agent the way the commands
// do: a session's fan-out feeds the Server, and on the other side a Client
// is the source of a dashboard's pipeline.
func TestAgentAndAttachAsPipelineEnds(t *testing.T) {
	t.Parallel()
	a := startAgent(t, Config{})
	fan := pipeline.NewFanout()
	consumed := make(chan struct{})
	sub := fan.Subscribe("agent", 1024, pipeline.Lossy)
	go func() {
		a.Consume(sub.Events())
		close(consumed)
	}()

	// The dashboard side: the attach client is its pipeline's primary source.
	c, err := NewClient(ClientConfig{URL: a.url})
	if err != nil {
		t.Fatal(err)
	}
	dash := pipeline.NewFanout()
	got := dash.Subscribe("aggregator", 16, pipeline.Lossless)
	attached := make(chan error, 1)
	go func() {
		_, err := pipeline.Run(context.Background(), pipeline.Config{Primary: []pipeline.Source{c}}, dash)
		attached <- err
	}()

	hdr := sessionEvent("rack-7").Session
	probe := pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
		for _, ev := range requests(0, 100) {
			emit(ev)
		}
		return nil
	})
	if _, err := pipeline.Run(context.Background(), pipeline.Config{Header: hdr, Primary: []pipeline.Source{probe}}, fan); err != nil {
		t.Fatal(err)
	}
	<-consumed

	var events []event.Event
	for ev := range got.Events() {
		events = append(events, ev)
	}
	if err := <-attached; err != nil {
		t.Fatalf("dashboard pipeline: %v", err)
	}
	sameEvents(t, events, append([]event.Event{event.NewSession(hdr)}, requests(0, 100)...))
}
