// Command latscope shows where every millisecond of an LLM request goes.
//
// main only builds the command tree and maps errors to exit codes; each
// subcommand lives in its own file and wires the packages it needs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
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

func main() {
	// The OpenTelemetry SDK (the simulator's span exporter, --otlp-export)
	// logs failures on its own; latscope reports them as counts and
	// markers instead, and nothing may write over the dashboard.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	otel.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "latscope:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "latscope",
		Short: "Where every millisecond of an LLM request goes",
		Long: `latscope streams synthetic requests to an LLM server, times every stage a
client can see, joins what the server and GPU report, and shows the result.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCmd(),
		newSimCmd(),
		newDemoCmd(),
		newRunCmd(),
		newBenchCmd(),
		newAgentCmd(),
		newAttachCmd(),
		newReplayCmd(),
		newReportCmd(),
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
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "latscope %s\n", version)
			return err
		},
	}
}
