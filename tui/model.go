package tui

import (
	"cmp"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// screen is which view fills the body.
type screen int

const (
	screenMain screen = iota
	screenRequests
	screenWaterfall
	screenConversations
)

// seekStep is how far ← and → move a replay.
const seekStep = 10 * time.Second

// model is the dashboard. It never reads the clock: every time it shows
// comes from the frames, and the render tick is a message.
type model struct {
	feed       Feed
	st         *styles
	keys       keyMap
	help       help.Model
	objectives []aggregate.Objective
	every      time.Duration
	// changed, when the feed can say so, is when to look again (no
	// sooner than every after the last look); nil: look every every.
	changed  <-chan struct{}
	lastLook time.Time

	width, height int
	window        aggregate.Window
	stat          aggregate.BandStat
	screen        screen
	showHelp      bool
	paused        bool // the screen, not the measuring
	playPaused    bool // a replay's playback

	frame    Frame // what is shown: full, or one of its agents
	full     Frame // the feed's newest frame
	shown    int   // attached to several agents: 0 the fleet, i+1 agent i
	hasFrame bool
	version  uint64
	seen     bool

	hist   *history
	gpu    gpuHistory
	charts *charts

	// tableNeed is the most lines the stage table has wanted: the layout
	// follows it, so it never shrinks back when a stage goes quiet.
	tableNeed int

	// The requests view's filter: applied, and as typed after `/`.
	filter    requestFilter
	typing    bool
	input     string
	filterErr string

	// Where the last render drew what a click can pick: the list row of
	// each screen line (the requests view), and the legend's entries.
	rowAt      []int
	legendHits []legendHit
	highlight  event.Stage // picked on the legend; "" for none

	list  requestList
	sel   int
	selID string
	open  *event.Request
	// openSum is the open request's decode numbers, as the request sample
	// published them (from all its chunks, where the record's are thinned).
	openSum *aggregate.DecodeSummary

	out     string // the rendered screen, rebuilt only when dirty
	dirty   bool
	renders int
}

func newModel(feed Feed, opts Options, r *lipgloss.Renderer) *model {
	_, canSeek := feed.(Seeker)
	_, canPause := feed.(Pauser)
	st := newStyles(r, opts.NoColor)
	m := &model{
		feed:       feed,
		st:         st,
		keys:       newKeyMap(canSeek, canPause),
		help:       help.New(),
		objectives: opts.Objectives,
		every:      cmp.Or(opts.Refresh, renderEvery),
		changed:    changesOf(feed),
		window:     opts.Window,
		stat:       opts.Stat,
		hist:       newHistory(),
		charts:     newCharts(st),
		dirty:      true,
	}
	m.help.Styles = help.Styles{
		Ellipsis: st.dim.style, ShortKey: st.key.style, ShortDesc: st.dim.style, ShortSeparator: st.faint.style,
		FullKey: st.key.style, FullDesc: st.text.style, FullSeparator: st.faint.style,
	}
	return m
}

// Init reads the first frame at once; the tick then keeps itself going.
func (m *model) Init() tea.Cmd { return func() tea.Msg { return tickMsg{at: time.Now()} } }

// Update handles one message; the screen is re-rendered here, only when
// something it shows changed, so View costs nothing.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.onSize(msg)
	case tickMsg:
		cmd = m.onTick(msg)
	case tea.KeyMsg:
		if m.typing {
			cmd = m.onFilterKey(msg)
		} else {
			cmd = m.onKey(msg)
		}
	case tea.MouseMsg:
		m.onMouse(msg)
	}
	if m.dirty {
		m.out = m.render()
		m.dirty = false
		m.renders++
	}
	return m, cmd
}

// View returns the last rendered screen.
func (m *model) View() string { return m.out }

func (m *model) onSize(msg tea.WindowSizeMsg) {
	m.width, m.height = msg.Width, msg.Height
	m.help.Width = msg.Width
	m.dirty = true
}

// onTick looks at the feed and says when to look next: on its next
// change where it says so, but no sooner than every after this look.
func (m *model) onTick(msg tickMsg) tea.Cmd {
	if m.changed == nil {
		m.poll()
		return tick(m.every)
	}
	if since := msg.at.Sub(m.lastLook); !msg.at.IsZero() && since < m.every {
		return tick(m.every - since) // changes come faster than the screen draws
	}
	m.lastLook = msg.at
	m.poll()
	return waitChange(m.changed)
}

// poll takes the feed's newest frame if it changed: the history always
// records it, the screen shows it unless paused.
func (m *model) poll() {
	fr, v := m.feed.Frame()
	if m.seen && v == m.version {
		return
	}
	m.seen, m.version = true, v
	m.full = fr
	m.keys.Agent.SetEnabled(len(fr.Agents) > 0)
	shown := pick(fr, m.shown)
	m.hist.add(&shown.Snapshot)
	m.gpu.add(&shown.Snapshot)
	if m.paused {
		return
	}
	m.frame, m.hasFrame = shown, true
	m.syncList()
	m.dirty = true
}

// syncList rebuilds the request rows, keeping the selected request
// selected while it is still listed.
func (m *model) syncList() {
	m.list = listOf(&m.frame.Snapshot.Sample, m.window, &m.filter, agentsOf(&m.full))
	// While the user looks at the list, the selected request stays
	// selected as the rows move; elsewhere the top row is.
	if m.screen == screenMain {
		m.sel = 0
	} else if i := m.list.index(m.selID, m.sel); i >= 0 {
		m.sel = i
	}
	m.sel = min(max(m.sel, 0), max(len(m.list.rows)-1, 0))
	if m.sel < len(m.list.rows) {
		m.selID = m.list.rows[m.sel].ID
	}
}

// onKey acts on a key press. Quit, help and the help screen come first;
// every other key is looked up in keyActions. A key that changes nothing
// leaves the screen as it is (dirty false).
func (m *model) onKey(msg tea.KeyMsg) tea.Cmd {
	k := &m.keys
	m.dirty = true
	switch {
	case key.Matches(msg, k.Quit):
		return tea.Quit
	case key.Matches(msg, k.Help):
		m.showHelp = !m.showHelp
		return nil
	case m.showHelp:
		if key.Matches(msg, k.Back) {
			m.showHelp = false
		}
		return nil
	}
	for _, a := range m.keyActions() {
		if key.Matches(msg, a.binding) {
			a.do(m)
			return nil
		}
	}
	m.dirty = false
	return nil
}

// keyAction is what one key does outside the help screen. An action that
// turns out to change nothing sets m.dirty false.
type keyAction struct {
	binding key.Binding
	do      func(m *model)
}

// keyActions lists the keys in the order they are matched.
func (m *model) keyActions() []keyAction {
	k := &m.keys
	return []keyAction{
		{k.Pause, (*model).togglePause},
		{k.Window, func(m *model) { m.cycleWindow(1) }},
		{k.WindowBack, func(m *model) { m.cycleWindow(aggregate.NumWindows - 1) }},
		{k.Stat, func(m *model) { m.stat = (m.stat + 1) % aggregate.NumBands }},
		{k.StatBack, func(m *model) { m.stat = (m.stat + aggregate.NumBands - 1) % aggregate.NumBands }},
		{k.Views, (*model).switchView},
		{k.Up, func(m *model) { m.move(-1) }},
		{k.Down, func(m *model) { m.move(1) }},
		{k.Agent, (*model).nextAgent},
		{k.Convo, (*model).toggleConversations},
		{k.Filter, (*model).startFilter},
		{k.Open, (*model).openSelected},
		{k.Back, (*model).back},
		{k.SeekBack, func(m *model) { m.seek(-seekStep) }},
		{k.SeekFwd, func(m *model) { m.seek(seekStep) }},
		{k.Replay, (*model).togglePlayback},
	}
}

// togglePause freezes the screen, or shows the newest frame at once.
func (m *model) togglePause() {
	m.paused = !m.paused
	if !m.paused {
		m.seen = false
		m.poll()
	}
}

// cycleWindow moves the statistics window by steps, modulo the windows.
func (m *model) cycleWindow(steps aggregate.Window) {
	m.window = (m.window + steps) % aggregate.NumWindows
	m.syncList()
}

// switchView goes from the main screen to the requests, and from any
// other back to the main one.
func (m *model) switchView() {
	if m.screen == screenMain {
		m.screen = screenRequests
	} else {
		m.screen = screenMain
	}
	m.syncList()
}

// toggleConversations opens the conversations view, or goes back to the
// main screen from it.
func (m *model) toggleConversations() {
	if m.screen == screenConversations {
		m.screen = screenMain
	} else {
		m.screen, m.open, m.openSum = screenConversations, nil, nil
	}
	m.syncList()
}

// nextAgent shows the next agent of a fleet, then the whole fleet again.
func (m *model) nextAgent() {
	if len(m.full.Agents) == 0 {
		m.dirty = false
		return
	}
	m.shown = (m.shown + 1) % (len(m.full.Agents) + 1)
	m.frame = pick(m.full, m.shown)
	m.syncList()
}

// startFilter opens the requests' filter prompt with the current filter.
func (m *model) startFilter() {
	if m.screen != screenRequests {
		m.dirty = false
		return
	}
	m.typing, m.input, m.filterErr = true, m.filter.text, ""
}

// togglePlayback pauses or resumes a replay that can pause.
func (m *model) togglePlayback() {
	if p, ok := m.feed.(Pauser); ok {
		m.playPaused = p.TogglePause()
	}
}

func (m *model) move(by int) {
	if m.screen != screenRequests || len(m.list.rows) == 0 {
		return
	}
	m.sel = min(max(m.sel+by, 0), len(m.list.rows)-1)
	m.selID = m.list.rows[m.sel].ID
}

func (m *model) back() {
	switch m.screen {
	case screenWaterfall:
		m.screen, m.open, m.openSum = screenRequests, nil, nil
	case screenRequests, screenConversations:
		m.screen = screenMain
		m.syncList()
	}
}

func (m *model) seek(by time.Duration) {
	if s, ok := m.feed.(Seeker); ok {
		s.Seek(by)
	}
}

// render draws the whole screen, every line exactly the terminal's width.
func (m *model) render() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	var lines []string
	m.rowAt, m.legendHits = nil, nil // what a click can pick is redrawn below
	switch {
	case m.showHelp:
		lines = m.renderHelp()
	case !m.hasFrame:
		lines = []string{fit(m.st.title.Render(" latscope")+m.st.dim.Render(" waiting for the first snapshot…"), m.width)}
	case m.screen == screenRequests:
		lines = m.renderBody(func(h int) []string {
			v := requestsView{filter: &m.filter, typing: m.typing, input: m.input, filterErr: m.filterErr, lengths: m.frame.Snapshot.LengthCounts}
			body, rowAt := renderRequests(m.st, &m.list, m.sel, m.begin(), m.window, v, m.width, h)
			m.rowAt = append(make([]int, headerLines), rowAt...)
			for i := range headerLines {
				m.rowAt[i] = -1
			}
			return body
		})
	case m.screen == screenConversations:
		lines = m.renderBody(func(h int) []string { return renderConversations(m.st, &m.frame.Snapshot, m.window, m.width, h) })
	case m.screen == screenWaterfall && m.open != nil:
		lines = m.renderBody(func(h int) []string { return renderWaterfall(m.st, m.open, m.openSum, m.width, h) })
	default:
		lines = m.renderMain()
	}
	lines = pad(lines, m.height-1)
	for i := range lines {
		lines[i] = fit(lines[i], m.width)
	}
	lines = append(lines, m.footer())
	return strings.Join(lines, "\n")
}

// renderBody puts a view under the header.
func (m *model) renderBody(body func(h int) []string) []string {
	lines := m.header()
	return append(lines, body(max(m.height-1-len(lines), 1))...)
}

func (m *model) header() []string {
	playPaused := m.playPaused || (m.frame.Playback != nil && m.frame.Playback.Paused)
	hs := headerState{window: m.window, stat: m.stat, paused: m.paused, playbackPause: playPaused, otlpOK: otlpJoined(&m.frame.Snapshot.Sample),
		agent: agentLabel(&m.full, m.shown), down: downText(&m.full, m.shown)}
	return renderHeader(m.st, &m.frame, hs, m.width)
}

// begin is when the session started, for times shown relative to it.
func (m *model) begin() time.Time {
	s := &m.frame.Snapshot
	return s.Now.Add(-s.Elapsed)
}

// footer lists the keys that fit, in order, and always ends with the
// help and quit keys, whatever the width.
func (m *model) footer() string {
	always := m.help.ShortHelpView([]key.Binding{m.keys.Help, m.keys.Quit})
	sep := m.st.faint.Render(" • ")
	room := m.width - 1 - visibleWidth(always)
	var b strings.Builder
	for _, k := range m.keys.ShortHelp() {
		if !k.Enabled() || k.Help().Key == m.keys.Help.Help().Key || k.Help().Key == m.keys.Quit.Help().Key {
			continue
		}
		item := m.help.ShortHelpView([]key.Binding{k}) + sep
		if visibleWidth(b.String())+visibleWidth(item) > room {
			break
		}
		b.WriteString(item)
	}
	return fit(" "+b.String()+always, m.width)
}

// otlpJoined reports whether a recent request carried a server span from
// the OTLP receiver, i.e. the join works.
func otlpJoined(rs *aggregate.RequestSample) bool {
	for _, r := range rs.Latest {
		if r.Server != nil && strings.HasPrefix(r.Server.Source, "otlp") {
			return true
		}
	}
	return false
}

// onFilterKey edits the filter after `/`: enter applies it, esc clears it.
func (m *model) onFilterKey(msg tea.KeyMsg) tea.Cmd {
	m.dirty = true
	switch msg.Type {
	case tea.KeyCtrlC:
		return tea.Quit
	case tea.KeyEnter:
		f, err := parseFilter(m.input)
		if err != nil {
			m.filterErr = err.Error()
			return nil
		}
		m.filter, m.typing = f, false
		m.syncList()
	case tea.KeyEsc:
		m.filter, m.typing, m.input = requestFilter{}, false, ""
		m.syncList()
	case tea.KeyBackspace:
		if r := []rune(m.input); len(r) > 0 {
			m.input = string(r[:len(r)-1])
		}
	case tea.KeySpace:
		m.input += " "
	case tea.KeyRunes:
		m.input += string(msg.Runes)
	default:
		m.dirty = false
	}
	return nil
}

// wheelStep is how many rows a wheel notch scrolls.
const wheelStep = 3

// onMouse: the wheel scrolls the requests; a click selects a request and
// a second click on it opens its waterfall; a click on a legend entry
// picks its stage across the screen (again, or elsewhere, unpicks it).
func (m *model) onMouse(msg tea.MouseMsg) {
	switch {
	case msg.Button == tea.MouseButtonWheelUp && msg.Action == tea.MouseActionPress:
		m.move(-wheelStep)
	case msg.Button == tea.MouseButtonWheelDown && msg.Action == tea.MouseActionPress:
		m.move(wheelStep)
	case msg.Button == tea.MouseButtonLeft && msg.Action == tea.MouseActionPress:
		m.click(msg.X, msg.Y)
	default:
		return
	}
	m.dirty = true
}

func (m *model) click(x, y int) {
	if m.showHelp || m.typing {
		return
	}
	switch m.screen {
	case screenRequests:
		if y < 0 || y >= len(m.rowAt) || m.rowAt[y] < 0 || m.rowAt[y] >= len(m.list.rows) {
			return
		}
		if i := m.rowAt[y]; i != m.sel {
			m.sel, m.selID = i, m.list.rows[i].ID
			return
		}
		m.openSelected()
	case screenMain:
		for _, h := range m.legendHits {
			if y == h.line && x >= h.from && x < h.to {
				if m.highlight == h.stage {
					m.highlight = ""
				} else {
					m.highlight = h.stage
				}
				return
			}
		}
		m.highlight = ""
	}
}

// openSelected opens the selected request's waterfall.
func (m *model) openSelected() {
	if m.screen != screenRequests || m.sel >= len(m.list.rows) {
		return
	}
	m.open, m.screen = m.list.rows[m.sel], screenWaterfall
	m.openSum = nil
	if sum, ok := m.frame.Snapshot.Sample.Decode[m.open]; ok {
		m.openSum = &sum
	}
}
