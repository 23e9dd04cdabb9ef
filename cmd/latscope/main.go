// Command latscope shows where every millisecond of an LLM request goes.
//
// main only builds the command tree and maps errors to exit codes; each
// subcommand lives in its own file and wires the packages it needs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"

	"github.com/latscope/latscope/internal/shutdown"
	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/session"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries a specific exit code (e.g. 2 for a failed SLO) up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// quietOpenTelemetry stops the OpenTelemetry SDK (the simulator's span
// exporter, --otlp-export) logging failures on its own: latscope reports
// them as counts and markers instead, and nothing may write over the
// dashboard.
func quietOpenTelemetry() {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	otel.SetLogger(logr.Discard())
}

func main() {
	quietOpenTelemetry()
	// Everything latscope writes as text goes through a textsafe writer:
	// whatever a server, an agent or a recording managed to put in a
	// message is shown escaped, never acted on by the terminal. (The
	// dashboard writes to the terminal itself; its text is made safe
	// where it enters, in event.Safe.)
	stdout, stderr := textsafe.NewShared(os.Stdout), textsafe.NewShared(os.Stderr)
	sh, ctx := shutdown.New(context.Background(), stderr, os.Exit)
	root := newRootCmd()
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	sh.Stop()
	code := exitCode(stderr, err, sh.Signal())
	_, _ = stdout.Flush(), stderr.Flush()
	os.Exit(code)
}

// exitCode prints err and returns the process's exit code, from the one
// table in pipeline.go: a signal makes any command's exit 130, whatever
// else went wrong after it (a summary that could not be written to a hung
// up terminal, a context cancelled under a request).
func exitCode(stderr io.Writer, err error, sig os.Signal) int {
	if sig != nil {
		switch rest := session.WithoutCancellation(err); {
		case codeOf(err) == exitInterrupted, rest == nil && errors.Is(err, session.ErrSetupInterrupted):
			fmt.Fprintf(stderr, "latscope: %v (%s)\n", err, shutdown.SignalName(sig))
		case rest != nil:
			fmt.Fprintln(stderr, "latscope:", rest)
			fallthrough
		default:
			fmt.Fprintf(stderr, "latscope: interrupted (%s)\n", shutdown.SignalName(sig))
		}
		return exitInterrupted
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "latscope:", err)
	return codeOf(err)
}

// exitCodes is the exit code of each reason a run can end for.
var exitCodes = map[session.Reason]int{
	session.Failed:      exitFailure,
	session.SLOMissed:   exitSLOMissed,
	session.AllFailed:   exitAllFailed,
	session.Interrupted: exitInterrupted,
}

// codeOf is the exit code a failed command's error asks for.
func codeOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if code, ok := exitCodes[session.ReasonOf(err)]; ok {
		return code
	}
	return exitFailure
}

// withExitCodes makes every command's error that says why its run ended
// (session.ExitError) carry the exit code for it.
func withExitCodes(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if err == nil || session.ReasonOf(err) == 0 {
				return err
			}
			return &exitError{code: codeOf(err), err: err}
		}
	}
	for _, sub := range c.Commands() {
		withExitCodes(sub)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "latscope",
		Short: "Where every millisecond of an LLM request goes",
		Long: `latscope streams synthetic requests to an LLM server, times every stage a
client can see, joins what the server and GPU report, and shows the result.

Exit codes, the same in every command: 0 done, 1 failure, 2 an --slo
objective missed, 3 no request succeeded (every finished one failed, or none
finished before the run's end cancelled them), 130 interrupted (SIGINT,
SIGTERM or SIGHUP: the summary so far is printed, the requests cut short
counted as cancelled, not errors; a second signal exits at once).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetVersionTemplate("latscope {{.Version}}\n")
	root.AddCommand(
		newVersionCmd(),
		newSimCmd(),
		newDemoCmd(),
		newRunCmd(),
		newWatchCmd(),
		newBenchCmd(),
		newAgentCmd(),
		newAttachCmd(),
		newReplayCmd(),
		newReportCmd(),
		newCompareCmd(),
		newExportCmd(),
		newSweepCmd(),
	)
	withExitCodes(root)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "latscope %s\n", versionString())
			return err
		},
	}
}

// versionString is the version set at build time, else what the Go
// toolchain recorded: the module's version (go install …@v1.2.3) or the
// commit it was built from.
func versionString() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return version
	}
	return version + " (" + rev + dirty + ")"
}
