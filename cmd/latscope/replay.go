package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/recorder"
	"github.com/latscope/latscope/session"
	"github.com/latscope/latscope/tui"
)

// replayLong is `latscope replay --help`'s text.
const replayLong = `replay reads a session recorded with --record and aggregates its events on
their own timestamps, exactly as the live run did, so --no-tui prints the same
summary (counts and percentiles) the recorded run printed.

On the dashboard, space pauses playback and ← / → seek ten seconds; quitting
prints the whole recording's summary.

A file cut short (the recording process was killed) replays up to its last
complete frame, with a warning naming the offset of the torn tail. A file that
is two recordings joined (cat a b > c) is refused at the second one's offset. A
second session header inside a file is refused too. A request recorded twice
(the same request id) is counted once, with a warning saying how many copies
were ignored.

FILE "-" reads the recording from standard input (a pipe): it is copied to a
temporary file as it arrives, and playback starts once the pipe is closed;
then pause and seek work as for a file.`

func newReplayCmd() *cobra.Command {
	var (
		speed   string
		noTUI   bool
		noColor bool
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "Play a recorded session back: the same summary, aggregated on the recording's own times",
		Long:  replayLong,
		Example: `  latscope replay session.lsr --no-tui
  latscope replay session.lsr --no-tui --json > summary.json
  latscope replay session.lsr --speed 10
  ssh gpu-box cat session.lsr | latscope replay - --no-tui`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sp, err := parseSpeed(speed, noTUI)
			if err != nil {
				return err
			}
			c := session.ReplayConfig{Arg: args[0], Stdin: cmd.InOrStdin(), Speed: sp, JSON: jsonOut, View: tui.Options{NoColor: noColor}}
			if useDashboard(cmd.OutOrStdout(), noTUI) {
				c.Screen = showDashboard
			}
			return session.Replay(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c)
		},
	}
	cmd.Flags().StringVar(&speed, "speed", "", "playback speed: 1, 10, any factor, or max (default 1 on the dashboard, max with --no-tui)")
	cmd.Flags().BoolVar(&noTUI, "no-tui", false, "print the summary instead of showing the dashboard")
	cmd.Flags().BoolVar(&noColor, "no-color", false, "dashboard without colour (also NO_COLOR=1)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the summary as one JSON object")
	return cmd
}

// parseSpeed reads --speed.
func parseSpeed(s string, headless bool) (float64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		if headless {
			return recorder.MaxSpeed, nil
		}
		return 1, nil
	case "max":
		return recorder.MaxSpeed, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "x"), 64)
	if err != nil || !(f > 0) || f > 1e6 {
		return 0, fmt.Errorf("--speed %q: want a factor such as 1 or 10, or max", s)
	}
	return f, nil
}
