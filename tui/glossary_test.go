package tui

import (
	"os"
	"strings"
	"testing"

	"github.com/latscope/latscope/event"
)

// docs/glossary.md defines what the help page does: every stage of the
// table with its letter and every word of the summary.
func TestGlossaryDocDefinesEveryStageAndWord(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/glossary.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, m := range event.StageTable() {
		if row := "| `" + string(m.Stage) + "` | `" + string(m.Letter) + "` |"; !strings.Contains(doc, row) {
			t.Errorf("docs/glossary.md has no row %q", row)
		}
	}
	for _, w := range summaryWords {
		if !strings.Contains(doc, "- **"+w.word+"**:") {
			t.Errorf("docs/glossary.md does not define %q", w.word)
		}
	}
	help := strings.Join(glossary(), " ")
	for _, w := range summaryWords {
		if !strings.Contains(help, w.word+": ") {
			t.Errorf("the help does not define %q", w.word)
		}
	}
}
