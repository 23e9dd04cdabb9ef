package tui

import "github.com/charmbracelet/bubbles/key"

// keyMap is every key the dashboard answers to. Seek and playback are
// enabled only when the feed can do them (a replay).
type keyMap struct {
	Help, Quit, Pause         key.Binding
	Window, WindowBack        key.Binding
	Stat, StatBack            key.Binding
	Views, Up, Down           key.Binding
	Open, Back, Filter, Agent key.Binding
	Convo                     key.Binding
	SeekBack, SeekFwd, Replay key.Binding
}

func newKeyMap(canSeek, canPause bool) keyMap {
	k := keyMap{
		Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:       key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Pause:      key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause screen")),
		Window:     key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "window 10s/1m/5m/run")),
		WindowBack: key.NewBinding(key.WithKeys("W"), key.WithHelp("W", "previous window")),
		Stat:       key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "statistic mean/p50/p90/p99")),
		StatBack:   key.NewBinding(key.WithKeys("S"), key.WithHelp("S", "previous statistic")),
		Views:      key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "main/requests")),
		Up:         key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:       key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Open:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open request")),
		Back:       key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Filter:     key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter requests")),
		Agent:      key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "fleet/agents")),
		Convo:      key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "conversations")),
		SeekBack:   key.NewBinding(key.WithKeys("left"), key.WithHelp("←", "seek −10s")),
		SeekFwd:    key.NewBinding(key.WithKeys("right"), key.WithHelp("→", "seek +10s")),
		Replay:     key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "pause playback")),
	}
	k.SeekBack.SetEnabled(canSeek)
	k.SeekFwd.SetEnabled(canSeek)
	k.Replay.SetEnabled(canPause)
	k.Agent.SetEnabled(false) // until a frame has several agents
	return k
}

// ShortHelp is the footer's line, most wanted first: the footer shows what
// fits, then help and quit. A replay's own keys lead on a replay.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Replay, k.SeekBack, k.Agent, k.Views, k.Window, k.Stat, k.Pause, k.Help, k.Quit}
}

// FullHelp is the help page, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Window, k.WindowBack, k.Stat, k.StatBack, k.Pause, k.Agent},
		{k.Views, k.Convo, k.Up, k.Down, k.Open, k.Back, k.Filter},
		{k.SeekBack, k.SeekFwd, k.Replay, k.Help, k.Quit},
	}
}
