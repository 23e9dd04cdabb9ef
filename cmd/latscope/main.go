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
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"

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
	stdout, stderr := newSafeStream(os.Stdout), newSafeStream(os.Stderr)
	sh, ctx := newShutdown(context.Background(), stderr, os.Exit)
	root := newRootCmd()
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	sh.stop()
	code := exitCode(stderr, err, sh.signal())
	_, _ = stdout.Flush(), stderr.Flush()
	os.Exit(code)
}

// safeStream is a textsafe.Writer shared by the goroutines that write to
// one stream (status lines, warnings, the summary).
type safeStream struct {
	mu  sync.Mutex
	w   *textsafe.Writer
	out io.Writer // what w writes to
}

func newSafeStream(w io.Writer) *safeStream { return &safeStream{w: textsafe.NewWriter(w), out: w} }

func (s *safeStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Flush writes a character cut short at the end, escaped.
func (s *safeStream) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Flush()
}

// exitCode prints err and returns the process's exit code, from the one
// table in pipeline.go: a signal makes any command's exit 130, whatever
// else went wrong after it (a summary that could not be written to a hung
// up terminal, a context cancelled under a request).
func exitCode(stderr io.Writer, err error, sig os.Signal) int {
	if sig != nil {
		var ee *exitError
		switch rest := withoutCancellation(err); {
		case errors.As(err, &ee) && ee.code == exitInterrupted, rest == nil && errors.Is(err, session.ErrSetupInterrupted):
			fmt.Fprintf(stderr, "latscope: %v (%s)\n", err, signalName(sig))
		case rest != nil:
			fmt.Fprintln(stderr, "latscope:", rest)
			fallthrough
		default:
			fmt.Fprintf(stderr, "latscope: interrupted (%s)\n", signalName(sig))
		}
		return exitInterrupted
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "latscope:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// withoutCancellation removes what an interruption leaves among a command's
// errors (cancelled contexts), keeping real failures.
func withoutCancellation(err error) error {
	return dropErrors(err, func(e error) bool {
		if _, joined := e.(interface{ Unwrap() []error }); joined {
			return false // look into it: a real failure may be joined to a cancellation
		}
		return errors.Is(e, context.Canceled) || errors.Is(e, session.ErrSetupInterrupted)
	})
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

// dropErrors returns err without the errors drop matches: err itself, or
// any of the errors it joins, however deep.
func dropErrors(err error, drop func(error) bool) error {
	if err == nil || drop(err) {
		return nil
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var rest []error
	for _, e := range joined.Unwrap() {
		if e = dropErrors(e, drop); e != nil {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}
