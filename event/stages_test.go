package event

import (
	"slices"
	"testing"
)

// TestStageTable: every client and breakdown stage is in the one table,
// once, with its own letter, a colour, a label and a meaning.
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
	for _, s := range append(ClientStages(), BreakdownStages()...) {
		if n := len(slices.DeleteFunc(slices.Clone(table), func(m StageMeta) bool { return m.Stage != s })); n != 1 {
			t.Errorf("%s is in the stage table %d times, want once", s, n)
		}
	}
}
