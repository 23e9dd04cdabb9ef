package tui

import (
	"slices"

	"github.com/latscope/latscope/event"
)

// stageOrder is the order a request crosses the breakdown stages: the
// client's own stages, then the server window, then what is left over. The
// bar, the legend, the table and the waterfall all follow it.
var stageOrder = event.BreakdownStages()

// clientStageOrder is the order the probe measures its client stages in.
var clientStageOrder = event.ClientStages()

// stageOther is what the aggregator's bands call stage names it does not know.
const stageOther event.Stage = "other"

// stageInfo is how one stage is shown: a letter that tells its bar segment
// apart without colour, and a short label for tight legends.
type stageInfo struct {
	letter byte
	short  string
}

var stageInfos = map[event.Stage]stageInfo{
	event.StageSchedLag:      {'l', "lag"},
	event.StageSerialize:     {'z', "serialize"},
	event.StageDNS:           {'d', "dns"},
	event.StageConnect:       {'c', "connect"},
	event.StageTLS:           {'s', "tls"},
	event.StageConnWait:      {'a', "conn wait"},
	event.StageWrite:         {'w', "write"},
	event.StageWaitHeaders:   {'H', "wait hdrs"},
	event.StageFirstToken:    {'F', "first tok"},
	event.StageNetworkOut:    {'n', "net out"},
	event.StageHTTP:          {'h', "http"},
	event.StageTokenize:      {'t', "tokenize"},
	event.StageServerWait:    {'v', "srv wait"}, // front end and queue, not told apart
	event.StageQueue:         {'q', "queue"},
	event.StagePrefill:       {'p', "prefill"},
	event.StageFirstDecode:   {'f', "1st dec"},
	event.StageDetokenize:    {'x', "detok"},
	event.StageNetworkReturn: {'r', "net back"},
	event.StageUnattributed:  {'u', "unattrib"},
	stageOther:               {'o', "other"},
	stageTTFT:                {'T', "TTFT"},
	stageDecode:              {'-', "decode"},
}

// infoOf returns how to show stage s; an unknown stage gets its first letter.
func infoOf(s event.Stage) stageInfo {
	if in, ok := stageInfos[s]; ok {
		return in
	}
	in := stageInfo{letter: 'o', short: string(s)}
	if len(s) > 0 {
		in.letter = s[0]
	}
	return in
}

// orderedStages returns the keys of m: those in canonical first, in its
// order, then the others sorted by name.
func orderedStages[V any](m map[event.Stage]V, canonical []event.Stage) []event.Stage {
	out := make([]event.Stage, 0, len(m))
	for _, s := range canonical {
		if _, ok := m[s]; ok {
			out = append(out, s)
		}
	}
	var rest []event.Stage
	for s := range m {
		if !slices.Contains(canonical, s) {
			rest = append(rest, s)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// estimated reports whether any of a stage's numbers were estimated rather
// than measured or reported by the server.
func estimated(provs []event.Provenance) bool {
	return slices.Contains(provs, event.Estimated)
}
