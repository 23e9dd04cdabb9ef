package event

import (
	"iter"
	"maps"
	"slices"
)

// StageMeta is how one stage is named and shown on every surface: the
// dashboard's bar, legend and table, the reports' charts. It is the one
// table of stage metadata; the order of the stages is ClientStages' and
// BreakdownStages' (ClientOrder and BreakdownOrder on the surfaces).
type StageMeta struct {
	Stage  Stage
	Letter byte   // tells its bar segment apart without colour
	Short  string // label for tight legends
	Term   string // ANSI 256-colour code on the terminal
	Fill   string // #rrggbb in the reports' charts; "" for the reports' default (StageOther's)
	// Meaning says in one line what the stage holds.
	Meaning string
}

// StageOther is what the aggregator calls the stages past the few it keeps
// under their own names that no table names (a server's own Server-Timing
// stages beyond them, a newer recording's): every surface shows their sum
// per request as one stage.
const StageOther Stage = "other"

// StageServerOwn stands, in the stage table, for every stage a server
// reported under a name of its own (ServerTimingPrefix + NAME): they are
// shown as "server: NAME" with this entry's letter and colours.
const StageServerOwn Stage = ServerTimingPrefix + "NAME"

// The reports' colours from the Okabe–Ito palette, which stays distinct
// under the common colour-vision deficiencies. The stage table's fills and
// the reports' lines both name them, so each is written once.
const (
	ChartOrange     = "#e69f00"
	ChartSkyBlue    = "#56b4e9"
	ChartGreen      = "#009e73" // Okabe–Ito's bluish green
	ChartYellow     = "#f0e442"
	ChartBlue       = "#0072b2"
	ChartVermillion = "#d55e00"
	ChartPurple     = "#cc79a7" // Okabe–Ito's reddish purple
)

// StageTable returns the metadata of every client and breakdown stage, and
// last StageOther's (a new slice each call).
func StageTable() []StageMeta {
	return []StageMeta{
		{StageSchedLag, 'l', "lag", "160", "#4d4d4d", "the probe started later than intended (open loop)"},
		{StageSerialize, 'z', "serialize", "67", "#7a7a7a", "building the prompt and marshalling the JSON body"},
		{StageDNS, 'd', "dns", "66", "#a0a0a0", "name resolution"},
		{StageConnect, 'c', "connect", "73", "#595959", "the TCP handshake"},
		{StageTLS, 's', "tls", "109", "#8c8c8c", "the TLS handshake"},
		{StageConnWait, 'a', "conn wait", "103", "#b3b3b3", "the rest of getting a connection"},
		{StageWrite, 'w', "write", "110", "#666666", "writing the request"},
		{StageWaitHeaders, 'H', "wait hdrs", "61", "", "request written → response headers"},
		{StageFirstToken, 'F', "first tok", "98", "", "response headers → the first content chunk"},
		{StageThinking, 'T', "thinking", "141", "#b39ddb", "a reasoning model's first token → its first answer token"},
		{StageNetworkOut, 'n', "net out", "38", ChartSkyBlue, "the request's trip to the server"},
		{StageProxy, 'P', "proxy", "139", "#8e6c8a", "the proxy hop in front of the server: what it reports less what the server reports"},
		{StageHTTP, 'h', "http", "180", ChartYellow, "the server's HTTP parsing"},
		{StageTokenize, 't', "tokenize", "220", ChartGreen, "tokenization, validation, templating"},
		{StageServerWait, 'v', "srv wait", "216", "#f3c77a", "the server's front end and queue, not told apart"},
		{StageQueue, 'q', "queue", "203", ChartOrange, "waiting for a batch slot (only on evidence)"},
		{StagePrefillQueue, 'Q', "pf queue", "208", "#b87400", "disaggregated serving: waiting for a prefill worker"},
		{StagePrefill, 'p', "prefill", "170", ChartBlue, "the prompt's forward pass"},
		{StageKVTransfer, 'k', "kv xfer", "31", "#2a9d8f", "disaggregated serving: the KV cache's trip from the prefill worker to the decode worker"},
		{StageDecodeQueue, 'D', "dec queue", "222", "#ffd27f", "disaggregated serving: waiting for a batch slot on the decode worker"},
		{StageFirstDecode, 'f', "1st dec", "77", ChartVermillion, "the first decode step"},
		{StageDetokenize, 'x', "detok", "150", ChartPurple, "detokenizing the first token"},
		{StageSSEFraming, 'e', "sse frame", "181", "#e8b3d3", "framing, writing and flushing the first SSE event"},
		{StageNetworkReturn, 'r', "net back", "44", "#9ad0f0", "the first frame's trip back"},
		{StageUnattributed, 'u', "unattrib", "242", "#d9d9d9", "what no source accounts for (negative: the sources disagree)"},
		{StageServerOwn, 'S', "server: NAME", "146", "#c2b8a3", "a stage the server reported (Server-Timing) under its own name, which latscope does not know: shown as reported, where it fits the server's time"},
		{StageOther, 'o', "other", "244", "#bbbbbb", "stages with names of their own beyond the few kept apart, summed per request"},
	}
}

// MetaOf is how stage s is shown: its entry in the stage table; for a
// stage the server named itself, StageServerOwn's under s's own name; for
// any other, StageOther's under s's own name.
func MetaOf(s Stage) StageMeta {
	table := StageTable()
	for _, m := range table {
		if m.Stage == s {
			return m
		}
	}
	want := StageOther
	if _, ok := ServerOwnStage(s); ok {
		want = StageServerOwn
	}
	for _, m := range table {
		if m.Stage == want {
			m.Stage, m.Short = s, string(s)
			return m
		}
	}
	return StageMeta{Stage: s, Short: string(s)}
}

// ClientOrder is the order of the client stages on every surface: the
// probe's (ClientStages), then a reasoning model's thinking, which runs on
// from the first token to the first answer token (a new slice each call).
func ClientOrder() []Stage { return append(ClientStages(), StageThinking) }

// BreakdownOrder is the order of the breakdown stages on every surface: the
// order a request crosses them (BreakdownStages), then a reasoning model's
// thinking, which on the answer basis ends the bar (a new slice each call).
func BreakdownOrder() []Stage { return append(BreakdownStages(), StageThinking) }

// OrderStages returns the stages of every set, once each: those in
// canonical in its order, then the others sorted by name. Pass
// maps.Keys(m) for a map.
func OrderStages(canonical []Stage, sets ...iter.Seq[Stage]) []Stage {
	seen := make(map[Stage]bool)
	for _, set := range sets {
		for s := range set {
			seen[s] = true
		}
	}
	out := make([]Stage, 0, len(seen))
	for _, s := range canonical {
		if seen[s] {
			out = append(out, s)
			delete(seen, s)
		}
	}
	// StageOther sums what has no place of its own: it goes last.
	other := seen[StageOther]
	delete(seen, StageOther)
	out = append(out, slices.Sorted(maps.Keys(seen))...)
	if other {
		out = append(out, StageOther)
	}
	return out
}
