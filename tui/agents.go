package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// pick is the frame to show of full: the fleet (shown 0) or one agent's
// (shown i+1), with the warnings and notices of all of them, and the
// agents kept for the per-agent table.
func pick(full Frame, shown int) Frame {
	if shown <= 0 || shown > len(full.Agents) {
		return full
	}
	fr := full.Agents[shown-1]
	fr.Agents = full.Agents
	fr.Status, fr.Notices = full.Status, full.Notices
	return fr
}

// agentLabel names what the screen shows when attached to several agents:
// "fleet · 3 agents" or "agent 2/3 east"; "" for a single source.
func agentLabel(full *Frame, shown int) string {
	n := len(full.Agents)
	switch {
	case n == 0:
		return ""
	case (shown <= 0 || shown > n) && full.Live != nil:
		return "fleet · " + full.Live.Text // its figures are over the agents live
	case shown <= 0 || shown > n:
		return fmt.Sprintf("fleet · %d agents", n)
	}
	fr := &full.Agents[shown-1]
	label := fmt.Sprintf("agent %d/%d %s", shown, n, agentName(fr, shown-1))
	if a := fr.Agent; a != nil && !a.Live && a.State != "" {
		label += " · " + a.State
	}
	return label
}

// downText says why the figures shown stopped moving: "" while what is
// shown streams (or is no attach); else the agent's state ("lost", "given
// up"), or "no agent live" for the fleet or a lone agent.
func downText(full *Frame, shown int) string {
	if full.Finished {
		return "" // the screen says finished
	}
	if shown > 0 && shown <= len(full.Agents) {
		if a := full.Agents[shown-1].Agent; a != nil && !a.Live && a.State != "" {
			return a.State
		}
		return ""
	}
	if l := full.Live; l != nil && l.Live == 0 {
		return l.Text
	}
	return ""
}

// agentDown says whether an agent's row shows figures that stopped.
func agentDown(fr *Frame) bool {
	return fr.Agent != nil && !fr.Agent.Live && fr.Agent.State != ""
}

func agentName(fr *Frame, i int) string {
	if h := fr.Snapshot.Session; h != nil && h.Name != "" {
		return h.Name
	}
	return "agent " + strconv.Itoa(i+1)
}

// requestAgents names the agent of each request the agents' samples hold,
// for the requests filter's @agent: by record, as the fleet's sample holds
// the same records, or else by ID and start (a thinned or judged copy, see
// aggregate.RequestSample, is another record of the same request).
type requestAgents struct {
	byRecord map[*event.Request]string
	byKey    map[requestKey]string
}

func agentsOf(full *Frame) *requestAgents {
	if len(full.Agents) == 0 {
		return nil
	}
	out := &requestAgents{byRecord: map[*event.Request]string{}, byKey: map[requestKey]string{}}
	for i := range full.Agents {
		name := agentName(&full.Agents[i], i)
		rs := &full.Agents[i].Snapshot.Sample
		for _, list := range append(rs.Slowest[:], rs.Latest) {
			for _, r := range list {
				out.byRecord[r] = name
				out.byKey[keyOf(r)] = name
			}
		}
	}
	return out
}

// of names r's agent; "" when unknown.
func (a *requestAgents) of(r *event.Request) string {
	if a == nil {
		return ""
	}
	if name, ok := a.byRecord[r]; ok {
		return name
	}
	return a.byKey[keyOf(r)]
}

// requestKey tells a request apart without its times of day: the fleet's
// copy of an agent's request is moved by the agent's clock offset.
type requestKey struct {
	id  string
	e2e time.Duration
}

func keyOf(r *event.Request) requestKey { return requestKey{r.ID, r.E2E} }

// renderAgents is the compact per-agent table of the main view: name,
// region, load, ok/s, TTFT p50 and p99, errors, clock offset and health,
// over the window; the agent shown is marked. Narrow screens drop the
// load, then the region.
func renderAgents(st *styles, agents []Frame, shown int, w aggregate.Window, width int) []string {
	if len(agents) == 0 {
		return nil
	}
	regions := false
	for i := range agents {
		regions = regions || agents[i].Agent != nil && agents[i].Agent.Region != ""
	}
	lines := []string{rule(st, st.title.Render("agents")+st.dim.Render(" · "+w.String()+" · ttft p50/p99 · clock offset · a cycles fleet and agents"), width)}
	for i := range agents {
		fr := &agents[i]
		s := &fr.Snapshot
		ld := ""
		if h := s.Session; h != nil {
			ld = load(h, s.Probe)
		}
		mark := "  "
		if i+1 == shown {
			mark = st.key.Render("▸ ")
		}
		line := mark + fit(agentName(fr, i), 12) + " "
		if regions && width >= 100 {
			region := ""
			if fr.Agent != nil {
				region = fr.Agent.Region
			}
			line += fit(region, 10) + " "
		}
		if width >= 120 { // the load goes first when space runs short
			line += fit(ld, 20) + " "
		}
		line += agentFigures(st, fr, w) + agentHealth(st, fr, i)
		lines = append(lines, fit(line, width))
	}
	return lines
}

// agentFigures is an agent's rates, TTFT, errors and clock offset over
// window w; greyed and blank while it is not live: its last window is not
// its rate now.
func agentFigures(st *styles, fr *Frame, w aggregate.Window) string {
	win := &fr.Snapshot.Windows[w]
	if agentDown(fr) {
		return st.faint.Render(fmt.Sprintf("ok %6s/s  ttft %-15s err %-6s %-9s ", rate(0), "- ms", "–", clockOffset(fr.Agent)))
	}
	okPerSec := 0.0
	if win.Span > 0 {
		okPerSec = float64(win.OK) / win.Span.Seconds()
	}
	errs := "0"
	if win.Sent > 0 {
		errs = pct(float64(win.Errors) / float64(win.Sent))
	}
	ttft := "-"
	if win.TTFT.Count > 0 {
		ttft = ms(win.TTFT.P50) + " / " + ms(win.TTFT.P99)
	}
	return fmt.Sprintf("ok %6s/s  ttft %-15s err %-6s %-9s ", rate(okPerSec), ttft+" ms", errs, clockOffset(fr.Agent))
}

// agentHealth is what the agent's status lines say, else its state.
func agentHealth(st *styles, fr *Frame, i int) string {
	if len(fr.Status) > 0 {
		prefix := "agent " + agentName(fr, i) + ": "
		var says []string
		for _, line := range fr.Status {
			says = append(says, strings.TrimPrefix(line, prefix))
		}
		return st.bad.Render(strings.Join(says, "; "))
	}
	if agentDown(fr) {
		return st.bad.Render(fr.Agent.State)
	}
	return st.good.Render("streaming")
}

// clockOffset is an agent's clock offset from this machine's, as the
// agents table shows it: "+250.0ms", or "clock ?" when not estimated.
func clockOffset(a *AgentInfo) string {
	if a == nil || !a.ClockKnown {
		return "clock ?"
	}
	return fmt.Sprintf("%+.1fms", float64(a.ClockOffset)/float64(time.Millisecond))
}
