package sweep

import (
	"errors"
	"fmt"
	"time"
)

// Spec is a sweep as a command line gives it: the steps (Rates or Streams
// as lists, else the doubling series from RateStart), how each is judged,
// StopErrors as a share ("5%"). Validate checks it, every error naming the
// flag to change.
type Spec struct {
	Rates, Streams                 string
	RateStart, RateFactor, RateMax float64
	Refine                         int
	Warmup, Window, StepMax        time.Duration
	StopErrors                     string
}

// Plan is the spec's plan.
func (sf *Spec) Plan() (Plan, error) {
	switch {
	case sf.Streams != "" && sf.Rates != "":
		return Plan{}, errors.New("--streams (closed loop) and --rates (open loop): give one")
	case sf.Streams != "":
		loads, err := ParseLoads(sf.Streams)
		if err != nil {
			return Plan{}, fmt.Errorf("--streams: %w", err)
		}
		return Plan{Mode: ClosedLoop, Loads: loads, Refine: sf.Refine}, nil
	case sf.Rates != "":
		loads, err := ParseLoads(sf.Rates)
		if err != nil {
			return Plan{}, fmt.Errorf("--rates: %w", err)
		}
		return Plan{Mode: OpenLoop, Loads: loads, Refine: sf.Refine}, nil
	}
	return Plan{Mode: OpenLoop, Start: sf.RateStart, Factor: sf.RateFactor, Max: sf.RateMax, Refine: sf.Refine}, nil
}

// Validate checks the spec, naming the one to change, so a bad
// one is refused before the sweep connects.
func (sf *Spec) Validate() error {
	plan, err := sf.Plan()
	if err != nil {
		return err
	}
	loads := plan
	loads.Refine = 0 // checked apart, so each error names its flag
	if err := loads.Validate(); err != nil {
		switch {
		case sf.Streams != "":
			return fmt.Errorf("--streams: %w", err)
		case sf.Rates != "":
			return fmt.Errorf("--rates: %w", err)
		}
		return fmt.Errorf("--rate-start/--rate-factor/--rate-max: %w", err)
	}
	if err := plan.Validate(); err != nil {
		return fmt.Errorf("--refine: %w", err)
	}
	// The sweep fills a zero with its default, so a flag's 0 would not
	// mean what it says.
	switch {
	case sf.Warmup <= 0:
		return fmt.Errorf("--step-warmup %s: want more than 0", sf.Warmup)
	case sf.Window <= 0:
		return fmt.Errorf("--steady-window %s: want more than 0", sf.Window)
	case sf.StepMax < sf.Warmup+sf.Window:
		return fmt.Errorf("--step-max %s: want at least --step-warmup + --steady-window (%s)", sf.StepMax, sf.Warmup+sf.Window)
	}
	stop, err := ParseFraction(sf.StopErrors)
	if err != nil {
		return fmt.Errorf("--stop-errors: %w", err)
	}
	if stop == 0 {
		return fmt.Errorf("--stop-errors %s: want a share above 0", sf.StopErrors)
	}
	return nil
}
