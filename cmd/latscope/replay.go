package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
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
			path, name, cleanup, err := recordingArg(cmd.Context(), cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			defer cleanup()
			// Open once up front: a file that is not a recording, or from
			// another version, fails here with a clear message.
			rd, err := recorder.Open(path)
			if err != nil {
				if name != path {
					return fmt.Errorf("%s: %w", name, err)
				}
				return err
			}
			rd.Close()
			if useDashboard(cmd.OutOrStdout(), noTUI) {
				feed := newReplayFeed(cmd.Context(), path, sp)
				err := showDashboard(cmd.Context(), feed, tui.Options{NoColor: noColor})
				soFar := feed.Close()
				if err != nil {
					return err
				}
				if cmd.Context().Err() != nil { // a signal: the summary up to the playhead
					return errors.Join(writeSummary(cmd.OutOrStdout(), soFar, jsonOut),
						session.Exit(session.Interrupted, errors.New("interrupted: the summary covers the recording up to the playhead")))
				}
				sp = recorder.MaxSpeed // then the whole file's summary, as --no-tui prints it
			}
			replay := recorder.NewReplay(path, recorder.ReplayOptions{Speed: sp, Name: name})
			m := session.Measurement{Pipe: pipeline.Config{Primary: []pipeline.Source{replay}}}
			summary, interrupted, err := m.Run(cmd.Context())
			if n := replay.Duplicates(); n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "latscope: warning: %s: %s\n", name, aggregate.DuplicatesNote(n))
				summary.DuplicatesIgnored = n
			}
			var torn *recorder.TornTailError
			if errors.As(err, &torn) {
				fmt.Fprintf(cmd.ErrOrStderr(), "latscope: warning: %s: %v; the summary covers everything before it\n", name, torn)
				err = withoutTorn(err)
			}
			interrupted = interrupted || cmd.Context().Err() != nil
			if interrupted { // a signal: what it cancelled is no failure, the summary so far is printed
				err = withoutCancellation(err)
			}
			if err != nil {
				return err
			}
			err = writeSummary(cmd.OutOrStdout(), summary, jsonOut)
			switch {
			case err != nil:
			case interrupted:
				err = session.Exit(session.Interrupted, errors.New("interrupted: the summary covers the recording up to there"))
			default: // the exit code the recorded run gave
				err = session.RecordedOutcome(cmd.ErrOrStderr(), summary)
			}
			return err
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

// withoutTorn removes a torn-tail warning from err (it was reported).
func withoutTorn(err error) error {
	return dropErrors(err, func(e error) bool {
		var torn *recorder.TornTailError
		return errors.As(e, &torn)
	})
}

// writeSummary prints s as a table, or as JSON.
func writeSummary(w io.Writer, s aggregate.Summary, jsonOut bool) error {
	if jsonOut {
		return aggregate.WriteJSON(w, s)
	}
	return aggregate.WriteTable(w, s)
}
