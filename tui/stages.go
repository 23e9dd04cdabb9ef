package tui

import (
	"slices"

	"github.com/latscope/latscope/event"
)

// stageOrder is the order a request crosses the breakdown stages: the
// client's own stages, then the server window, then what is left over,
// then a reasoning model's thinking. The bar, the legend and the table
// follow it, as the reports do.
var stageOrder = event.BreakdownOrder()

// clientStageOrder is the order the probe measures its client stages in,
// then a reasoning model's thinking, as in the reports.
var clientStageOrder = event.ClientOrder()

// stageOther is what the aggregator's bands call stage names it does not know.
const stageOther = event.StageOther

// stageInfo is how one stage is shown: a letter that tells its bar segment
// apart without colour, and a short label for tight legends.
type stageInfo struct {
	letter byte
	short  string
}

// stageInfos are the stages' letters and labels from event.StageTable
// (stageOther's too), with the dashboard's own pseudo-stages; read-only
// after init.
var stageInfos = func() map[event.Stage]stageInfo {
	m := map[event.Stage]stageInfo{
		stageTTFT:   {'#', "TTFT"}, // not T: thinking's
		stageDecode: {'-', "decode"},
	}
	for _, s := range event.StageTable() {
		m[s.Stage] = stageInfo{s.Letter, s.Short}
	}
	return m
}()

// infoOf returns how to show stage s: a stage the table does not name
// gets its entry's letter (event.MetaOf: the server's own stages 'S', any
// other other's 'o') under its own name.
func infoOf(s event.Stage) stageInfo {
	if in, ok := stageInfos[s]; ok {
		return in
	}
	m := event.MetaOf(s)
	return stageInfo{letter: m.Letter, short: m.Short}
}

// estimated reports whether any of a stage's numbers were estimated rather
// than measured or reported by the server.
func estimated(provs []event.Provenance) bool {
	return slices.Contains(provs, event.Estimated)
}
