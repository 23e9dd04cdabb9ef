package tui

import (
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

	width, height int
	window        aggregate.Window
	stat          aggregate.BandStat
	screen        screen
	showHelp      bool
	paused        bool // the screen, not the measuring
	playPaused    bool // a replay's playback

	frame    Frame // what is shown
	hasFrame bool
	version  uint64
	seen     bool

	hist   *history
	gpu    gpuHistory
	watch  *watcher
	charts *charts

	// tableNeed is the most lines the stage table has wanted: the layout
	// follows it, so it never shrinks back when a stage goes quiet.
	tableNeed int

	list  requestList
	sel   int
	selID string
	open  *event.Request
	// openSum is the open request's decode numbers when its chunks were
	// thinned (see sampleChunks).
	openSum *decodeSummary

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
		every:      renderEvery,
		window:     opts.Window,
		stat:       opts.Stat,
		hist:       newHistory(),
		watch:      newWatcher(opts.Objectives),
		charts:     newCharts(st),
		dirty:      true,
	}
	m.help.Styles = help.Styles{
		Ellipsis: st.dim, ShortKey: st.key, ShortDesc: st.dim, ShortSeparator: st.faint,
		FullKey: st.key, FullDesc: st.text, FullSeparator: st.faint,
	}
	return m
}

// Init reads the first frame at once; the tick then keeps itself going.
func (m *model) Init() tea.Cmd { return func() tea.Msg { return tickMsg{} } }

// Update handles one message; the screen is re-rendered here, only when
// something it shows changed, so View costs nothing.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.onSize(msg)
	case tickMsg:
		cmd = m.onTick()
	case tea.KeyMsg:
		cmd = m.onKey(msg)
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

func (m *model) onTick() tea.Cmd {
	m.poll()
	return tick(m.every)
}

// poll takes the feed's newest frame if it changed: the history always
// records it, the screen shows it unless paused.
func (m *model) poll() {
	fr, v := m.feed.Frame()
	if m.seen && v == m.version {
		return
	}
	m.seen, m.version = true, v
	m.hist.add(&fr.Snapshot)
	m.gpu.add(&fr.Snapshot)
	m.watch.observe(&fr.Snapshot)
	if m.paused {
		return
	}
	m.frame, m.hasFrame = fr, true
	m.syncList()
	m.dirty = true
}

// syncList rebuilds the request rows, keeping the selected request
// selected while it is still listed.
func (m *model) syncList() {
	m.list = listOf(&m.frame.Requests, m.window)
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

func (m *model) onKey(msg tea.KeyMsg) tea.Cmd {
	k := &m.keys
	m.dirty = true
	switch {
	case key.Matches(msg, k.Quit):
		return tea.Quit
	case key.Matches(msg, k.Help):
		m.showHelp = !m.showHelp
	case m.showHelp:
		if key.Matches(msg, k.Back) {
			m.showHelp = false
		}
	case key.Matches(msg, k.Pause):
		m.paused = !m.paused
		if !m.paused {
			m.seen = false // show the newest frame at once
			m.poll()
		}
	case key.Matches(msg, k.Window):
		m.window = (m.window + 1) % aggregate.NumWindows
		m.syncList()
	case key.Matches(msg, k.WindowBack):
		m.window = (m.window + aggregate.NumWindows - 1) % aggregate.NumWindows
		m.syncList()
	case key.Matches(msg, k.Stat):
		m.stat = (m.stat + 1) % aggregate.NumBands
	case key.Matches(msg, k.StatBack):
		m.stat = (m.stat + aggregate.NumBands - 1) % aggregate.NumBands
	case key.Matches(msg, k.Views):
		if m.screen == screenMain {
			m.screen = screenRequests
		} else {
			m.screen = screenMain
		}
		m.syncList()
	case key.Matches(msg, k.Up):
		m.move(-1)
	case key.Matches(msg, k.Down):
		m.move(1)
	case key.Matches(msg, k.Open):
		if m.screen == screenRequests && m.sel < len(m.list.rows) {
			m.open, m.screen = m.list.rows[m.sel], screenWaterfall
			m.openSum = nil
			if sum, ok := m.frame.Requests.Decode[m.open]; ok {
				m.openSum = &sum
			}
		}
	case key.Matches(msg, k.Back):
		m.back()
	case key.Matches(msg, k.SeekBack):
		m.seek(-seekStep)
	case key.Matches(msg, k.SeekFwd):
		m.seek(seekStep)
	case key.Matches(msg, k.Replay):
		if p, ok := m.feed.(Pauser); ok {
			m.playPaused = p.TogglePause()
		}
	default:
		m.dirty = false
	}
	return nil
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
	case screenRequests:
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
	switch {
	case m.showHelp:
		lines = m.renderHelp()
	case !m.hasFrame:
		lines = []string{fit(m.st.title.Render(" latscope")+m.st.dim.Render(" waiting for the first snapshot…"), m.width)}
	case m.screen == screenRequests:
		lines = m.renderBody(func(h int) []string {
			return renderRequests(m.st, &m.list, m.sel, m.begin(), m.window, m.width, h)
		})
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
	hs := headerState{window: m.window, stat: m.stat, paused: m.paused, playbackPause: playPaused, otlpOK: otlpJoined(&m.frame.Requests)}
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
func otlpJoined(rs *RequestSample) bool {
	for _, r := range rs.Latest {
		if r.Server != nil && strings.HasPrefix(r.Server.Source, "otlp") {
			return true
		}
	}
	return false
}
