package event

import (
	"maps"
	"slices"
	"strconv"
	"testing"
)

// TestStageTable: every client and breakdown stage, and StageOther, is in
// the one table, once, with its own letter, a colour, a label and a
// meaning.
func TestStageTable(t *testing.T) {
	t.Parallel()
	table := StageTable()
	letters := map[byte]Stage{}
	for _, m := range table {
		if m.Letter == 0 || m.Short == "" || m.Term == "" || m.Meaning == "" {
			t.Errorf("%s: incomplete: %+v", m.Stage, m)
		}
		if other, ok := letters[m.Letter]; ok {
			t.Errorf("%s and %s share the letter %c", m.Stage, other, m.Letter)
		}
		letters[m.Letter] = m.Stage
	}
	for _, s := range append(append(ClientStages(), BreakdownStages()...), StageOther) {
		if n := len(slices.DeleteFunc(slices.Clone(table), func(m StageMeta) bool { return m.Stage != s })); n != 1 {
			t.Errorf("%s is in the stage table %d times, want once", s, n)
		}
	}
}

// TestStageOrders: the surfaces' orders follow the table's (a stage
// earlier in the table comes earlier in each order), and thinking follows
// the probe's client stages and the breakdown.
func TestStageOrders(t *testing.T) {
	t.Parallel()
	pos := map[Stage]int{}
	for i, m := range StageTable() {
		pos[m.Stage] = i
	}
	for name, order := range map[string][]Stage{"client": ClientOrder(), "breakdown": BreakdownOrder()} {
		for i := 1; i < len(order); i++ {
			if order[i] != StageThinking && pos[order[i]] <= pos[order[i-1]] {
				t.Errorf("%s order: %s after %s, but the table has it before", name, order[i], order[i-1])
			}
		}
		if order[len(order)-1] != StageThinking {
			t.Errorf("%s order %v does not end with thinking", name, order)
		}
	}
}

func TestOrderStages(t *testing.T) {
	t.Parallel()
	a := map[Stage]int{ServerTimingPrefix + "z": 1, StageQueue: 1, StageThinking: 1, "a-newer-stage": 1}
	b := map[Stage]bool{StagePrefill: true, StageOther: true, StageQueue: true}
	got := OrderStages(BreakdownOrder(), maps.Keys(a), maps.Keys(b))
	want := []Stage{StageQueue, StagePrefill, StageThinking, "a-newer-stage", ServerTimingPrefix + "z", StageOther}
	if !slices.Equal(got, want) {
		t.Errorf("OrderStages = %v, want %v", got, want)
	}
	if got := OrderStages(ClientOrder()); len(got) != 0 {
		t.Errorf("no sets: %v, want none", got)
	}
}

// A recording made when a server's own stage was called "st:NAME" reads
// back with it as "server: NAME", in every place a request holds stages.
func TestLegacyServerStageRenamedOnDecode(t *testing.T) {
	t.Parallel()
	line := `{"v":` + strconv.Itoa(SchemaVersion) + `,"kind":"request","request":{"id":"r","outcome":"ok",` +
		`"stages":[{"stage":"st:a","ns":1,"prov":"server"}],` +
		`"breakdown":[{"stage":"st:loop_wait","ns":2,"prov":"server"},{"stage":"prefill","ns":3,"prov":"server"}],` +
		`"server_timing":{"source":"server-timing","stages":{"st:loop_wait":2}}}}`
	e, err := Unmarshal([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	r := e.Request
	want := Stage(ServerTimingPrefix + "loop_wait")
	if r.Stages[0].Stage != ServerTimingPrefix+"a" || r.Breakdown[0].Stage != want || r.Breakdown[1].Stage != StagePrefill {
		t.Errorf("stages %v, breakdown %v: want server: names", r.Stages, r.Breakdown)
	}
	if _, ok := r.Server.Stages[want]; !ok || len(r.Server.Stages) != 1 {
		t.Errorf("server stages %v, want %s alone", r.Server.Stages, want)
	}
	if name, ok := ServerOwnStage(want); !ok || name != "loop_wait" {
		t.Errorf("ServerOwnStage(%s) = %q, %v", want, name, ok)
	}
	if m := MetaOf(want); m.Letter != 'S' || m.Short != string(want) {
		t.Errorf("MetaOf(%s) = %+v, want the server's own stages' letter under its name", want, m)
	}
}
