package report

import (
	"github.com/latscope/latscope/aggregate"
)

// objectivesTable judges the session's objectives (--slo, kept in its
// header) on the whole run with aggregate's one evaluation, as the run's
// exit code did. Objectives aggregate refuses are reported as refused,
// never judged by a guess; a session without any has no table.
func objectivesTable(s *aggregate.Summary) (table, bool) {
	if s.Session == nil || s.Session.Load.SLO == "" {
		return table{}, false
	}
	t := table{Title: "Objectives (whole run)", Columns: []string{"objective", "got", "verdict"}, Text: true}
	objectives, err := aggregate.ParseSLO(s.Session.Load.SLO)
	if err != nil {
		t.Notes = append(t.Notes, "The session's objectives are refused, so none is judged: "+err.Error())
		return t, true
	}
	for _, r := range aggregate.Evaluate(*s, objectives) {
		verdict := "met"
		switch {
		case !r.Judged:
			verdict = "missed: " + r.GotText // as the exit code counts it
		case !r.Pass:
			verdict = "missed"
		}
		got := r.GotText
		if !r.Judged {
			got = "-"
		}
		t.Rows = append(t.Rows, []string{r.Objective.String(), got, verdict})
	}
	t.Notes = append(t.Notes, "An objective without data is missed, not met, as latscope run --slo counts it for its exit code. Breaches that lasted a whole "+aggregate.BreachWindow.Words()+" window are listed with the markers.")
	return t, true
}
