package session

import (
	"testing"

	"github.com/latscope/latscope/probe"
)

func TestGCPercentOnlyForManyClosedLoopStreams(t *testing.T) {
	for _, c := range []struct {
		name string
		load probe.LoadConfig
		want int
	}{
		{"one stream", probe.LoadConfig{Concurrency: 1}, 0},
		{"just under", probe.LoadConfig{Concurrency: manyStreams - 1}, 0},
		{"many", probe.LoadConfig{Concurrency: manyStreams}, manyStreamsGCPercent},
		{"open loop", probe.LoadConfig{Concurrency: 1, Rate: 5000}, 0},
		{"steps, one of them many", probe.LoadConfig{Concurrency: 1, Steps: []probe.LoadStep{{Concurrency: 8}, {Concurrency: 2000}}}, manyStreamsGCPercent},
		{"steps, few; concurrency ignored", probe.LoadConfig{Concurrency: 5000, Steps: []probe.LoadStep{{Concurrency: 8}}}, 0},
	} {
		if got := GCPercent(c.load); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
