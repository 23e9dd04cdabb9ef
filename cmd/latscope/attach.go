package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/tui"
)

func newAttachCmd() *cobra.Command {
	var (
		agentsFile, token, caFile, record string
		noTUI, jsonOut, noColor           bool
	)
	cmd := &cobra.Command{
		Use:   "attach URL [URL...]",
		Short: "The dashboard for remote agents: watch one or several `latscope agent`s",
		Long: `attach streams the events of one or more agents (latscope agent) and
aggregates them here. Each agent's events are aggregated on the agent's own
timestamps, one timeline per agent: two machines' clocks differ, so latscope
never mixes one agent's times with another's or with this machine's clock.

A dropped connection is retried with backoff and resumed from the last event
received; nothing the agent's replay ring still holds is lost, and anything
older is counted as lost, never silently skipped.

With several agents, --record FILE writes one file per agent (FILE with the
agent's name before the extension).`,
		Example: `  latscope attach http://127.0.0.1:7070
  latscope attach https://gpu-1:7070 https://gpu-2:7070 --token "$LATSCOPE_TOKEN" --ca ca.pem
  latscope attach --agents fleet.txt --no-tui --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			urls := args
			if agentsFile != "" {
				more, err := readAgentsFile(agentsFile)
				if err != nil {
					return err
				}
				urls = append(urls, more...)
			}
			if len(urls) == 0 {
				return errors.New("name at least one agent, e.g. latscope attach http://127.0.0.1:7070 (or --agents FILE)")
			}
			if token == "" {
				token = os.Getenv(agent.TokenEnv)
			}
			return runAttach(cmd, urls, token, caFile, record, jsonOut, useDashboard(cmd.OutOrStdout(), noTUI), noColor)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&agentsFile, "agents", "", "a file of agent URLs, one per line (# starts a comment)")
	fl.StringVar(&token, "token", "", "the agents' bearer token (default: $"+agent.TokenEnv+")")
	fl.StringVar(&caFile, "ca", "", "trust this CA (PEM) for the agents' TLS certificates")
	fl.StringVar(&record, "record", "", "record what the agents send (one file per agent when there are several)")
	fl.BoolVar(&noTUI, "no-tui", false, "print a status line per agent, and their summaries at the end")
	fl.BoolVar(&jsonOut, "json", false, "print the summaries as JSON (with --no-tui)")
	fl.BoolVar(&noColor, "no-color", false, "dashboard without colour (also NO_COLOR=1)")
	return cmd
}

// readAgentsFile reads agent URLs, one per line; blank lines and # comments
// are skipped.
func readAgentsFile(path string) ([]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--agents: %w", err)
	}
	defer file.Close()
	var urls []string
	sc := bufio.NewScanner(file)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("--agents %s line %d: want one URL per line", path, n)
		}
		urls = append(urls, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--agents %s: %w", path, err)
	}
	return urls, nil
}

// attached is one agent: its client and the result of its own pipeline.
type attached struct {
	client  *agent.Client
	url     string
	summary aggregate.Summary
	err     error
}

func runAttach(cmd *cobra.Command, urls []string, token, caFile, record string, jsonOut, dashboard bool, noColor bool) error {
	ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
	runCtx, stopRuns := context.WithCancel(ctx)
	defer stopRuns()
	agents := make([]*attached, 0, len(urls))
	for _, u := range urls {
		c, err := agent.NewClient(agent.ClientConfig{URL: u, Token: token, CAFile: caFile})
		if err != nil {
			return fmt.Errorf("attach %s: %w", u, err)
		}
		agents = append(agents, &attached{client: c, url: u})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // serialises the status lines of several agents
	feed := &attachFeed{}
	for i, a := range agents {
		// Each agent is one timeline: its own pipeline and aggregator, on
		// its own timestamps (Now nil).
		m := measurement{pipe: pipeline.Config{Primary: []pipeline.Source{a.client}}}
		if dashboard {
			snaps := pipeline.NewLatest[aggregate.Snapshot]()
			feeds := make(chan *tui.LiveFeed, 1)
			m.observers = append(m.observers, snaps.Put)
			m.consumers = append(m.consumers, dashboardFeed{snaps: snaps, feeds: feeds})
			feed.agents = append(feed.agents, attachedFeed{client: a.client, feeds: feeds})
		} else {
			line := statusLine(&prefixWriter{w: stderr, mu: &mu, prefix: func() string { return a.client.Name() + ": " }})
			m.observers = append(m.observers, line)
		}
		if record != "" {
			path := record
			if len(agents) > 1 {
				ext := filepath.Ext(record)
				path = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(record, ext), i+1, ext)
			}
			m.consumers = append(m.consumers, &lateRecording{path: path})
		}
		wg.Go(func() {
			a.summary, a.err = m.run(runCtx)
			a.err = withoutInterrupted(a.err) // an attached dashboard ends when the user stops it
		})
	}
	if dashboard {
		feed.ready()
		err := showDashboard(ctx, feed, tui.Options{NoColor: noColor})
		stopRuns()
		if err != nil {
			return err
		}
	}
	wg.Wait()
	if jsonOut {
		return writeAttachJSON(cmd.OutOrStdout(), agents)
	}
	var errs []error
	for _, a := range agents {
		fmt.Fprintf(cmd.OutOrStdout(), "== agent %s (%s)\n", a.client.Name(), a.url)
		if err := aggregate.WriteTable(cmd.OutOrStdout(), a.summary); err != nil {
			return fmt.Errorf("write the summary: %w", err)
		}
		fmt.Fprintln(cmd.OutOrStdout())
		if a.err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a.url, a.err))
		}
	}
	return errors.Join(errs...)
}

func writeAttachJSON(w io.Writer, agents []*attached) error {
	type entry struct {
		Agent   string            `json:"agent"`
		URL     string            `json:"url"`
		Error   string            `json:"error,omitempty"`
		Summary aggregate.Summary `json:"summary"`
	}
	out := make([]entry, 0, len(agents))
	for _, a := range agents {
		e := entry{Agent: a.client.Name(), URL: a.url, Summary: a.summary}
		if a.err != nil {
			e.Error = a.err.Error()
		}
		out = append(out, e)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the summaries: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// prefixWriter prefixes each write (one status line) and serialises writers.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix func() string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.w, p.prefix()); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

// lateRecording records an attached agent: the file is created when the
// agent's session header arrives (it is the file's first record).
type lateRecording struct {
	path string
	rec  *recording
}

func (l *lateRecording) start(ctx context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("recorder", 1<<16, pipeline.Lossless)
	done := make(chan error, 1)
	go func() {
		// The agent sends its session header first; the file starts with it.
		for ev := range sub.Events() {
			if ev.Session == nil {
				continue
			}
			rec, err := newRecording(l.path, ev.Session, false)
			if err != nil {
				for range sub.Events() { // a lossless consumer keeps reading
				}
				done <- err
				return
			}
			err = rec.w.Record(ctx, sub.Events())
			done <- errors.Join(err, rec.w.Close())
			return
		}
		done <- nil
	}()
	return func() error { return <-done }
}

// attachFeed drives the dashboard from several agents: the first agent's
// session in the main panels, one TTFT bar per agent, and a status line for
// every agent that is not streaming (connecting, reconnecting, failed).
type attachFeed struct {
	agents []attachedFeed
}

type attachedFeed struct {
	client *agent.Client
	feeds  chan *tui.LiveFeed
	feed   *tui.LiveFeed
}

// ready waits for every agent's feed (their consumers start with their
// pipelines).
func (f *attachFeed) ready() {
	for i := range f.agents {
		f.agents[i].feed = <-f.agents[i].feeds
	}
}

func (f *attachFeed) Frame() (tui.Frame, uint64) {
	var out tui.Frame
	var version uint64
	for i, a := range f.agents {
		fr, v := a.feed.Frame()
		version += v
		if i == 0 {
			out = fr
			out.Status = append([]string(nil), fr.Status...)
		}
		if len(f.agents) > 1 {
			out.Sources = append(out.Sources, fr.Snapshot)
		}
		if st := a.client.Status(); st.State != agent.Streaming {
			out.Status = append(out.Status, agentStatusLine(st))
		}
	}
	return out, version
}

// agentStatusLine says what an agent that is not streaming is doing.
func agentStatusLine(st agent.Status) string {
	line := fmt.Sprintf("agent %s: %s", st.Name, st.State)
	if st.Attempt > 0 {
		line += fmt.Sprintf(" (attempt %d)", st.Attempt)
	}
	if st.Err != "" {
		line += ": " + st.Err
	}
	if st.Lost > 0 {
		line += fmt.Sprintf("; %d events lost", st.Lost)
	}
	return line
}
