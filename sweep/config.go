package sweep

import (
	"errors"
	"time"

	"github.com/latscope/latscope/aggregate/sweepjudge"
	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
)

// Defaults for Config's zero fields (the judge's, sweepjudge.Rules). A
// step takes at least Warmup+Window.
const (
	DefaultWarmup     = sweepjudge.DefaultWarmup
	DefaultWindow     = sweepjudge.DefaultWindow
	DefaultStepMax    = sweepjudge.DefaultStepMax
	DefaultInterval   = sweepjudge.DefaultInterval
	DefaultTolerance  = sweepjudge.DefaultTolerance
	DefaultMinGrowth  = sweepjudge.DefaultMinGrowth
	DefaultStopErrors = sweepjudge.DefaultStopErrors
)

// Config is one sweep.
type Config struct {
	Plan Plan
	// Step builds the source that sends one step's load, usually a
	// probe.Runner whose LoadConfig has the step's Rate or Concurrency and
	// no Duration or Requests. It runs until the sweep ends the step by
	// cancelling its context (its requests still in flight are then
	// cancelled and left out of the step); it may also end by itself.
	// Every step should send different prompts (a different seed), or a
	// prefix cache would make later steps cheaper than earlier ones.
	Step func(StepSpec) (pipeline.Source, error)
	// Aux sources (metrics scrape, GPU, span receiver) run across the whole
	// sweep; Stage (the attributor) sits between the sources and the
	// fan-out, and Header opens the stream, as in pipeline.Config. The
	// Stage must not move an event ahead of one emitted before it (the
	// attributor only holds requests back).
	Aux    []pipeline.Source
	Stage  pipeline.Stage
	Header *event.Session
	Buffer int
	// Fanout, when set, is the pipeline's fan-out, with the caller's other
	// consumers (recorder, dashboard feed) already subscribed; nil makes a
	// private one.
	Fanout *pipeline.Fanout

	// Rules judge each step: the SLO, warm-up, window, step limit,
	// interval, tolerance, backlog floor and error-rate stop (zero fields
	// take the defaults above).
	sweepjudge.Rules

	// Progress, when set, is called with the steps so far and the running
	// step's live statistics, every Interval of event time, at each step's
	// end and once when the sweep is done (Done set). Calls come one at a
	// time, from the goroutine that reads the stream, which waits for
	// them: hand the value off quickly (a pipeline.Latest).
	Progress func(Progress)
	// Now stamps the step markers; time.Now when nil. The markers' times
	// bound each step, so they must come from the clock the sources use.
	Now func() time.Time
}

// settings is a Config with its defaults filled in.
type settings struct {
	Config
}

// settings checks a Config for a live sweep and fills in its defaults.
func (c Config) settings() (settings, error) {
	if err := c.Plan.Validate(); err != nil {
		return settings{}, err
	}
	if c.Step == nil {
		return settings{}, errors.New("sweep: no Step function")
	}
	return c.rules()
}

// rules fills in and checks the fields that judge a step, all a replay
// needs.
func (c Config) rules() (settings, error) {
	r, err := c.Rules.Fill()
	if err != nil {
		return settings{}, err
	}
	c.Rules = r
	if c.Now == nil {
		c.Now = time.Now
	}
	return settings{Config: c}, nil
}
