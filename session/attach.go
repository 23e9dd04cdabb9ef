package session

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/latscope/latscope/agent"
	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/fleet"
	"github.com/latscope/latscope/internal/fileread"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/tui"
)

// attached is one agent: its client and the result of its own pipeline.
type attached struct {
	client  *agent.Client
	url     string
	summary aggregate.Summary
	err     error
	// Headless only: its lines on stderr, and what goes wrong with it.
	out   io.Writer
	watch *attachWatch
}

// offset is the agent's clock minus this machine's, as last estimated (0
// while unknown: the fleet then takes its events as the agent dated them).
func (a *attached) offset() time.Duration {
	off, _ := a.client.ClockOffset()
	return off
}

// AttachOptions are what attach watches and how it shows them.
type AttachOptions struct {
	// URLs are the agents, with those listed in AgentsFile (one a line, #
	// comments) after them.
	URLs       []string
	AgentsFile string
	Client     agent.ClientConfig // shared by every agent's client; URL and ClockPings are set per agent
	Record     string             // --record: one file per agent's session
	JSON       bool               // headless: the summaries as one JSON object
	// Screen shows the dashboard; nil runs headless (a status line per
	// agent on Stderr, the summaries on Stdout at the end).
	Screen         Screen
	NoColor        bool
	Stdout, Stderr io.Writer
}

// Attach streams the agents' events, each into its own pipeline and
// aggregator on the agent's own timestamps, and the fleet (their requests
// merged on this machine's clock), until they end or ctx does; then it
// writes their summaries and says how the attach went (an ExitError when
// no agent was reached or their requests failed).
func Attach(ctx context.Context, o AttachOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	dashboard, stderr := o.Screen != nil, o.Stderr
	runCtx, stopRuns := context.WithCancel(ctx)
	defer stopRuns()
	agents, err := newAttached(o, &sync.Mutex{})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	feed := &attachFeed{}
	// The fleet: the agents' requests merged, exactly, on this machine's
	// clock; the dashboard shows it beside the agents when there are
	// several, the headless output after them.
	var merged *fleet.Fleet
	switch {
	case dashboard && len(agents) > 1:
		feed.fleet = newFleetView()
		merged = feed.fleet.merged
	case !dashboard:
		merged = fleet.New(fleet.Config{})
	}
	paths := newRecordPaths(o.Record, len(agents))
	for i, a := range agents {
		m := a.measurement(merged, feed, dashboard)
		if o.Record != "" {
			rec := &lateRecording{paths: paths, agent: i}
			m.Consumers = append(m.Consumers, rec)
			if dashboard {
				feed.agents[len(feed.agents)-1].rec = rec
			} else {
				m.Observers = append(m.Observers, rec.WarnWhenFailing(a.out, time.Now))
			}
		}
		wg.Go(func() {
			a.summary, _, a.err = m.Run(runCtx) // an attached dashboard ends when the user stops it: no interruption
		})
	}
	if dashboard {
		feed.ready()
		err := o.Screen(ctx, feed, tui.Options{NoColor: o.NoColor})
		stopRuns()
		if err != nil {
			return err
		}
	}
	wg.Wait() // every agent's source has returned: the fleet has all it gets
	return reportAttach(o.Stdout, stderr, agents, merged, o.JSON)
}

// newAttached makes each agent's client; headless, its lines go to
// o.Stderr after its name, mu serialising them.
func newAttached(o AttachOptions, mu *sync.Mutex) ([]*attached, error) {
	agents := make([]*attached, 0, len(o.URLs))
	for _, u := range o.URLs {
		a := &attached{url: u}
		cfg := o.Client
		cfg.URL, cfg.ClockPings = u, clockPings
		if o.Screen == nil {
			a.out = &prefixWriter{w: o.Stderr, mu: mu, prefix: func() string { return a.client.Name() + ": " }}
			a.watch = &attachWatch{w: a.out, now: time.Now}
			cfg.OnState = a.watch.onState // a failed connection is said at once
		}
		c, err := agent.NewClient(cfg)
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", u, err)
		}
		a.client = c
		agents = append(agents, a)
	}
	return agents, nil
}

// measurement is the agent's own timeline: its pipeline and aggregator, on
// its own timestamps (Now nil), feeding the dashboard or its status line;
// the fleet, when there is one, gets its events too.
func (a *attached) measurement(merged *fleet.Fleet, feed *attachFeed, dashboard bool) Measurement {
	var src pipeline.Source = a.client
	if merged != nil {
		src = merged.Source(a.client, a.offset)
	}
	m := Measurement{Pipe: pipeline.Config{Primary: []pipeline.Source{src}}}
	if dashboard {
		snaps := pipeline.NewLatest[aggregate.Snapshot]()
		feeds := make(chan *tui.LiveFeed, 1)
		m.Observers = append(m.Observers, snaps.Put)
		m.Consumers = append(m.Consumers, DashboardFeed{Snaps: snaps, Feeds: feeds})
		feed.agents = append(feed.agents, attachedFeed{client: a.client, feeds: feeds})
		return m
	}
	line := StatusLine(a.out, statusEvery(a.out))
	m.Observers = append(m.Observers, func(s aggregate.Snapshot) {
		st := a.client.Status()
		a.watch.counts(st)
		// Zeros from an agent never reached would read as an idle one.
		if st.Connections > 0 {
			line(s)
		}
	})
	return m
}

// reportAttach prints the agents' summaries and the fleet's (merged; nil
// on a dashboard with a single agent), and says how the attach went.
func reportAttach(stdout, stderr io.Writer, agents []*attached, merged *fleet.Fleet, jsonOut bool) error {
	var fleetSummary aggregate.Summary
	if merged != nil {
		fleetSummary = merged.Summary()
	}
	judged := fleetSummary // what the exit code is judged on: the fleet, or the one agent
	if merged == nil && len(agents) == 1 {
		judged = agents[0].summary
	}
	unreached := neverConnected(agents)
	if jsonOut {
		if err := writeAttachJSON(stdout, fleetSummary, agents); err != nil {
			return err
		}
		return attachOutcome(stderr, agents, unreached, judged)
	}
	if err := writeAttachTables(stdout, agents, merged != nil && len(agents)-len(unreached) > 1, fleetSummary); err != nil {
		return err
	}
	if len(unreached) > 0 && len(unreached) < len(agents) {
		fmt.Fprintf(stderr, "latscope: %d of %d agents never connected: %s\n", len(unreached), len(agents), strings.Join(unreached, "; "))
	}
	return attachOutcome(stderr, agents, unreached, judged)
}

// recordPaths names the files of an attach's --record FILE: FILE itself
// for a single agent's session, else FILE with the agent's name (from its
// session header, made safe for a file name) before the extension. A name
// already given, to another agent of the same name or to an earlier
// session of an agent that restarted, gets a number after it.
type recordPaths struct {
	file   string
	agents int

	mu    sync.Mutex
	taken map[string]bool
}

func newRecordPaths(file string, agents int) *recordPaths {
	return &recordPaths{file: file, agents: agents, taken: make(map[string]bool)}
}

// claim returns the path for a session of agent i (0-based).
func (p *recordPaths) claim(i int, header *event.Session) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ext := filepath.Ext(p.file)
	stem := strings.TrimSuffix(p.file, ext)
	path := p.file
	if p.agents > 1 {
		stem += "-" + fileNamePart(cmp.Or(header.Name, header.Host, strconv.Itoa(i+1)))
		path = stem + ext
	}
	for n := 2; p.taken[path]; n++ {
		path = stem + "-" + strconv.Itoa(n) + ext
	}
	p.taken[path] = true
	return path
}

// fileNamePart keeps letters, digits, '.', '-' and '_' of an agent's name
// (a remote party's words) and replaces anything else, so that it cannot
// reach another directory or carry control characters into a path.
func fileNamePart(name string) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= 64 {
			break
		}
		switch {
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_'),
			r == '.' && b.Len() > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// writeAttachTables writes each agent's summary (or why it was never
// reached) and, withFleet, the fleet's.
func writeAttachTables(w io.Writer, agents []*attached, withFleet bool, fleetSummary aggregate.Summary) error {
	for _, a := range agents {
		if st := a.client.Status(); st.Connections == 0 {
			fmt.Fprintf(w, "== agent %s (%s): never connected: %s\n\n", a.client.Name(), a.url, lastError(st))
			continue
		}
		fmt.Fprintf(w, "== agent %s (%s)\n", a.client.Name(), a.url)
		if err := aggregate.WriteTable(w, a.summary); err != nil {
			return fmt.Errorf("write the summary: %w", err)
		}
		fmt.Fprintln(w)
	}
	if withFleet {
		fmt.Fprintf(w, "== fleet: %s\n", fleetHeading(agents))
		if err := aggregate.WriteTable(w, fleetSummary); err != nil {
			return fmt.Errorf("write the fleet's summary: %w", err)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// fleetHeading says over which agents the fleet's figures are: those
// reached, by name, and how many were live when attach ended.
func fleetHeading(agents []*attached) string {
	var names []string
	sts := make([]agent.Status, 0, len(agents))
	for _, a := range agents {
		st := a.client.Status()
		sts = append(sts, st)
		if st.Connections > 0 {
			names = append(names, st.Name)
		}
	}
	return fmt.Sprintf("%d agents' requests merged (%s); %s at the end", len(names), strings.Join(names, ", "), fleet.LivenessOf(sts))
}

// neverConnected names each agent no connection reached, with its last
// error.
func neverConnected(agents []*attached) []string {
	var out []string
	for _, a := range agents {
		if st := a.client.Status(); st.Connections == 0 {
			out = append(out, fmt.Sprintf("%s (%s): %s", a.client.Name(), a.url, lastError(st)))
		}
	}
	return out
}

func lastError(st agent.Status) string {
	if st.LastErr == "" {
		return "no connection was tried"
	}
	return st.LastErr
}

// attachOutcome fails an attach that reached no agent (exit 1, naming each
// agent and its last error), and one where an agent failed.
func attachOutcome(stderr io.Writer, agents []*attached, unreached []string, judged aggregate.Summary) error {
	if len(unreached) == len(agents) {
		return Exit(Failed, fmt.Errorf("no agent could be reached: %s", strings.Join(unreached, "; ")))
	}
	var errs []error
	for _, a := range agents {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a.url, a.err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The agents' requests judged as a run's are: every one failed is 3,
	// a missed objective of the agents' --slo 2.
	return RecordedOutcome(stderr, judged)
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

// lateRecording records an attached agent: a file is created when the
// agent's session header arrives (it is the file's first record), and a
// new one when the agent restarted and sends a new session's header.
type lateRecording struct {
	paths *recordPaths
	agent int
	rec   atomic.Pointer[Recording] // the file being written, once created
}

func (l *lateRecording) Start(ctx context.Context, fan *pipeline.Fanout) func() error {
	sub := fan.Subscribe("recorder", 1<<16, pipeline.Lossless)
	done := make(chan error, 1)
	go func() {
		var header *event.Session
		for ev := range sub.Events() { // the agent sends its session header first
			if header = ev.Session; header != nil {
				break
			}
		}
		var errs []error
		for header != nil {
			rec, err := NewRecording(l.paths.claim(l.agent, header), header, false)
			if err != nil {
				for range sub.Events() { // a lossless consumer keeps reading
				}
				errs = append(errs, err)
				break
			}
			l.rec.Store(rec)
			header, err = rec.RecordSession(ctx, sub.Events())
			errs = append(errs, err)
		}
		done <- errors.Join(errs...)
	}()
	return func() error { return <-done }
}

// lateEvents announces the events the agent's recording could not write,
// undated: the local clock is not the agent's.
func (l *lateRecording) LateEvents() []event.Event {
	if rec := l.rec.Load(); rec != nil {
		return rec.LateEvents()
	}
	return nil
}

// WarnWhenFailing is Recording.WarnWhenFailing once the file exists.
func (l *lateRecording) WarnWhenFailing(w io.Writer, now func() time.Time) func(aggregate.Snapshot) {
	var warn func(aggregate.Snapshot)
	return func(s aggregate.Snapshot) {
		if warn == nil {
			rec := l.rec.Load()
			if rec == nil {
				return
			}
			warn = rec.WarnWhenFailing(w, now)
		}
		warn(s)
	}
}

// Failure says how the recording failed, for the dashboard; "" while it
// has not.
func (l *lateRecording) Failure() string {
	if rec := l.rec.Load(); rec != nil {
		return rec.Failure()
	}
	return ""
}

// attachFeed drives the dashboard from one agent or several: with several,
// the fleet (every agent's requests in one aggregator) and one frame per
// agent, which a key cycles, and a status line for every agent that is not
// streaming (connecting, reconnecting, failed).
type attachFeed struct {
	agents []attachedFeed
	fleet  *fleetView // nil for a single agent

	mu      sync.Mutex
	states  []fleet.AgentState // the agents' states at the last frame
	changes uint64             // how many times they changed
}

// stateChanges counts the frames at which some agent's state differed
// from the frame before.
func (f *attachFeed) stateChanges(states []fleet.AgentState) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(states, f.states) {
		f.states = states
		f.changes++
	}
	return f.changes
}

type attachedFeed struct {
	client *agent.Client
	feeds  chan *tui.LiveFeed
	feed   *tui.LiveFeed
	rec    *lateRecording // nil without --record
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
	if f.fleet != nil {
		out, version = f.fleet.frame()
	}
	sts := make([]agent.Status, len(f.agents))
	for i, a := range f.agents {
		sts[i] = a.client.Status()
	}
	live := fleet.LivenessOf(sts)
	for i, a := range f.agents {
		st := sts[i]
		fr, v := a.feed.Frame()
		version += v
		fr.Status = append([]string(nil), fr.Status...)
		if st.State != agent.Streaming {
			fr.Status = append(fr.Status, agentStatusLine(st))
		}
		if a.rec != nil {
			if msg := a.rec.Failure(); msg != "" {
				fr.Status = append(fr.Status, "agent "+a.client.Name()+": "+msg)
			}
		}
		if f.fleet == nil && i == 0 {
			out = fr
			continue
		}
		fr.Agent = agentInfo(st)
		out.Status = append(out.Status, fr.Status...)
		out.Agents = append(out.Agents, fr)
	}
	// The version moves with the agents' states too: a lost agent sends
	// nothing more, yet the screen must say so.
	version += f.stateChanges(live.States)
	out.Live = &tui.Liveness{Live: live.Live, Total: live.Total, Text: live.String()}
	return out, version
}

// agentStatusLine says what an agent that is not streaming is doing: lost
// (reached, then its connection ended), given up, or its client's state.
func agentStatusLine(st agent.Status) string {
	what := st.State.String()
	switch state := fleet.StateOf(st); state {
	case fleet.Lost, fleet.GivenUp:
		what = string(state)
	}
	line := fmt.Sprintf("agent %s: %s", st.Name, what)
	if st.Attempt > 0 {
		line += fmt.Sprintf(" (attempt %d)", st.Attempt)
	}
	if st.Err != "" {
		line += ": " + st.Err
	}
	if st.State == agent.Reconnecting && !st.RetryAt.IsZero() {
		line += "; retrying in " + untilText(st.RetryAt, time.Now())
	}
	if st.Lost > 0 {
		line += fmt.Sprintf("; %d events lost", st.Lost)
	}
	return line
}

// attachLineEvery is the least time between two lines about the same
// connection error of one agent: the backoff retries it more often at first.
const attachLineEvery = 10 * time.Second

// attachWatch says on w what goes wrong with one agent as it happens, for
// the headless output (the dashboard shows the same in its header): a
// failed connection (a new error at once, the same one again at most every
// attachLineEvery) and giving up, from the client's state changes; events
// dropped because their ids went backwards and events the agent says it no
// longer held, from its counts at every snapshot.
type attachWatch struct {
	w   io.Writer
	now func() time.Time

	mu       sync.Mutex // onState runs on the client's goroutine, counts on the aggregator's
	lastErr  string     // the error last said
	lastLine time.Time
	dups     int64
	lost     int64
	clocks   int // clock estimates said
}

// onState is the client's OnState: it only writes a line, so it does not
// hold the client up.
func (a *attachWatch) onState(st agent.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	switch st.State {
	case agent.Reconnecting:
		if st.Err != a.lastErr || now.Sub(a.lastLine) >= attachLineEvery {
			a.lastErr, a.lastLine = st.Err, now
			lost := ""
			if fleet.StateOf(st) == fleet.Lost {
				lost = "lost: " // reached before: its figures stopped with it
			}
			fmt.Fprintf(a.w, "%s%s; retrying in %s (attempt %d)\n", lost, st.Err, untilText(st.RetryAt, now), st.Attempt)
		}
	case agent.Failed, agent.GaveUp:
		fmt.Fprintf(a.w, "gave up: %s\n", st.Err)
	case agent.Streaming:
		if a.lastErr != "" {
			fmt.Fprintf(a.w, "connected\n")
			a.lastErr = ""
		}
		// Each connection estimates the agent's clock before it streams.
		if st.ClockEstimates > a.clocks {
			a.clocks = st.ClockEstimates
			sayClock(a.w, st)
		}
	}
}

// counts says the events dropped or lost since it last looked.
func (a *attachWatch) counts(st agent.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st.Duplicates > a.dups {
		fmt.Fprintf(a.w, "%d events dropped: their ids went backwards (taken for duplicates); %d in all\n", st.Duplicates-a.dups, st.Duplicates)
		a.dups = st.Duplicates
	}
	if st.Lost > a.lost {
		fmt.Fprintf(a.w, "%d events lost: the agent no longer held them; %d in all\n", st.Lost-a.lost, st.Lost)
		a.lost = st.Lost
	}
}

// untilText is the time left until at, rounded for a person.
func untilText(at, now time.Time) string {
	d := max(at.Sub(now), 0)
	if d < time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// check reads the agents file into URLs and checks the options.
func (o *AttachOptions) check() error {
	if o.AgentsFile != "" {
		more, err := readAgentsFile(o.AgentsFile)
		if err != nil {
			return err
		}
		o.URLs = append(slices.Clip(o.URLs), more...)
	}
	switch {
	case len(o.URLs) == 0:
		return errors.New("name at least one agent, e.g. latscope attach http://127.0.0.1:7070 (or --agents FILE)")
	case o.Client.ConnectTimeout <= 0:
		return fmt.Errorf("--connect-timeout %s: want more than 0", o.Client.ConnectTimeout)
	case o.Client.GiveUp <= 0:
		return fmt.Errorf("--give-up %s: want more than 0", o.Client.GiveUp)
	}
	return nil
}

// readAgentsFile reads agent URLs, one per line; blank lines and # comments
// are skipped.
func readAgentsFile(path string) ([]string, error) {
	file, err := fileread.Open(path, fileread.Limit{Flag: "--agents", Max: fileread.MiB, What: "a list of agents"})
	if err != nil {
		return nil, err
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
