package event

// StageMeta is how one stage is named and shown on every surface: the
// dashboard's bar, legend and table, the reports' charts. It is the one
// table of stage metadata; the order of the stages is ClientStages' and
// BreakdownStages'.
type StageMeta struct {
	Stage  Stage
	Letter byte   // tells its bar segment apart without colour
	Short  string // label for tight legends
	Term   string // ANSI 256-colour code on the terminal
	Fill   string // #rrggbb in the reports' charts; "" for the reports' default
	// Meaning says in one line what the stage holds.
	Meaning string
}

// StageTable returns the metadata of every client and breakdown stage (a
// new slice each call).
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
		{StageNetworkOut, 'n', "net out", "38", "#56b4e9", "the request's trip to the server"},
		{StageProxy, 'P', "proxy", "139", "#8e6c8a", "the proxy hop in front of the server: what it reports less what the server reports"},
		{StageHTTP, 'h', "http", "180", "#f0e442", "the server's HTTP parsing"},
		{StageTokenize, 't', "tokenize", "220", "#009e73", "tokenization, validation, templating"},
		{StageServerWait, 'v', "srv wait", "216", "#f3c77a", "the server's front end and queue, not told apart"},
		{StageQueue, 'q', "queue", "203", "#e69f00", "waiting for a batch slot (only on evidence)"},
		{StagePrefill, 'p', "prefill", "170", "#0072b2", "the prompt's forward pass"},
		{StageFirstDecode, 'f', "1st dec", "77", "#d55e00", "the first decode step"},
		{StageDetokenize, 'x', "detok", "150", "#cc79a7", "detokenizing the first token"},
		{StageSSEFraming, 'e', "sse frame", "181", "#e8b3d3", "framing, writing and flushing the first SSE event"},
		{StageNetworkReturn, 'r', "net back", "44", "#9ad0f0", "the first frame's trip back"},
		{StageUnattributed, 'u', "unattrib", "242", "#d9d9d9", "what no source accounts for (negative: the sources disagree)"},
	}
}
