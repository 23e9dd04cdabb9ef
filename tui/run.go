package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/latscope/latscope/aggregate"
)

// Options tune the dashboard. The zero value is usable.
type Options struct {
	// NoColor draws without colour: bar segments then show their stage's
	// letter. The NO_COLOR environment variable does the same.
	NoColor bool
	// Objectives are the SLOs to draw: a limit line on their chart,
	// breaches coloured in the stage table, and a marker when one is
	// broken for a whole window.
	Objectives []aggregate.Objective
	// Window and Stat are what the screen starts on (the zero values: the
	// last 10 s, the mean).
	Window aggregate.Window
	Stat   aggregate.BandStat
	// Refresh is how often the screen takes the feed's newest frame; 0
	// means 10 times a second. A dashboard served to remote viewers takes
	// it less often, so that each costs the server less.
	Refresh time.Duration
	// Input and Output default to the terminal (standard input and output).
	Input  io.Reader
	Output io.Writer
}

// Run shows the dashboard full-screen until the user quits (q or Ctrl-C)
// or ctx ends, and restores the terminal either way. It does not handle
// signals: the caller cancels ctx on one. Ctrl-C only quits the
// dashboard: the caller then stops measuring and prints its summary. Run
// returns nil in both cases, and an error only when the terminal failed.
func Run(ctx context.Context, feed Feed, opts Options) error {
	if feed == nil {
		return errors.New("tui: no feed")
	}
	out := opts.Output
	if out == nil {
		out = os.Stdout
	}
	// The caller owns the signals (cancelling ctx stops the dashboard):
	// Bubble Tea's own handler raced with it and could block its shutdown.
	progOpts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(out)}
	if opts.Input != nil {
		progOpts = append(progOpts, tea.WithInput(opts.Input))
	}
	_, err := NewProgram(feed, opts, lipgloss.NewRenderer(out), progOpts...).Run()
	switch {
	case err == nil, errors.Is(err, tea.ErrInterrupted):
		return nil
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return nil
	}
	return fmt.Errorf("dashboard: %w", err)
}

// screenFPS is how often Bubble Tea looks for a new screen to write.
const screenFPS = 10

// NewProgram returns the dashboard over feed as a Bubble Tea program of
// its own, drawn with r: a model of its own, so that its window,
// statistic and view change with its own keys only. Several programs may
// share one feed (a remote session each). progOpts name its input and
// output (tea.WithInput, tea.WithOutput) and, with tea.WithContext, what
// stops it; it never takes this process's signals. Opts.Input and
// Opts.Output are not read: progOpts say where it reads and writes.
func NewProgram(feed Feed, opts Options, r *lipgloss.Renderer, progOpts ...tea.ProgramOption) *tea.Program {
	if os.Getenv("NO_COLOR") != "" {
		opts.NoColor = true
	}
	// Bubble Tea writes a changed screen on a ticker that wakes at its
	// frame rate whether anything changed or not: frames come at most twice
	// a second (and on keys), and ten wakeups a second keep a key's answer
	// within 100 ms at a third of the 30 that cost a dashboard left open
	// about 3 ms of CPU a second.
	base := []tea.ProgramOption{tea.WithoutSignalHandler(), tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithFPS(screenFPS)}
	return tea.NewProgram(newModel(feed, opts, r), append(base, progOpts...)...)
}

// ParseWindow reads a window name as written on the command line: "10s",
// "1m", "5m" or "run".
func ParseWindow(s string) (aggregate.Window, error) {
	for w := range aggregate.NumWindows {
		if w.String() == s {
			return w, nil
		}
	}
	return 0, fmt.Errorf("unknown window %q (want 10s, 1m, 5m or run)", s)
}
