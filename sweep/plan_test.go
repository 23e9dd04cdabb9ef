package sweep

import (
	"slices"
	"strings"
	"testing"
)

func values(loads []Load) []float64 {
	out := make([]float64, len(loads))
	for i, l := range loads {
		out[i] = l.Value
	}
	return out
}

func TestCoarseLoads(t *testing.T) {
	tests := []struct {
		name string
		plan Plan
		want []float64
	}{
		{"rates doubling", Plan{Mode: OpenLoop, Start: 25, Factor: 2, Max: 200}, []float64{25, 50, 100, 200}},
		{"rates to a max between", Plan{Mode: OpenLoop, Start: 10, Factor: 1.5, Max: 40}, []float64{10, 15, 22.5, 33.75}},
		{"streams doubling", Plan{Mode: ClosedLoop, Start: 1, Factor: 2, Max: 16}, []float64{1, 2, 4, 8, 16}},
		// Whole streams, each at least one more than the last.
		{"streams by 1.5", Plan{Mode: ClosedLoop, Start: 1, Factor: 1.5, Max: 10}, []float64{1, 2, 3, 5, 8}},
		{"explicit list", Plan{Mode: ClosedLoop, Loads: []float64{1, 3, 7}}, []float64{1, 3, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.plan.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := values(tc.plan.coarse()); !slices.Equal(got, tc.want) {
				t.Errorf("coarse = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanValidate(t *testing.T) {
	tests := []struct {
		plan Plan
		want string
	}{
		{Plan{Start: 1, Factor: 2, Max: 4}, "mode"},
		{Plan{Mode: OpenLoop, Start: 0, Factor: 2, Max: 4}, "start 0"},
		{Plan{Mode: OpenLoop, Start: 1, Factor: 1, Max: 4}, "factor 1"},
		{Plan{Mode: OpenLoop, Start: 5, Factor: 2, Max: 4}, "max 4"},
		{Plan{Mode: OpenLoop, Start: 1, Factor: 1.01, Max: 1e6}, "steps"},
		{Plan{Mode: OpenLoop, Start: 1, Factor: 2, Max: 4, Refine: -1}, "refine"},
		{Plan{Mode: ClosedLoop, Start: 0.5, Factor: 2, Max: 4}, "at least 1 stream"},
		{Plan{Mode: ClosedLoop, Loads: []float64{1, 2.5}}, "whole number"},
		{Plan{Mode: OpenLoop, Loads: []float64{4, 2}}, "ascending"},
	}
	for _, tc := range tests {
		err := tc.plan.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error about %q", tc.plan, err, tc.want)
		}
	}
}

// walk runs the plan against a server that passes every load up to
// capacity and saturates above it, and returns the loads in the order run
// and why the sweep stopped.
func walk(t *testing.T, p Plan, capacity float64) ([]float64, string) {
	t.Helper()
	var steps []Step
	for range 100 {
		spec, ok, why := p.next(steps)
		if !ok {
			return values(loadsOf(steps)), why
		}
		spec.Index = len(steps) + 1
		s := Step{StepSpec: spec, Throughput: min(spec.Load.Value, capacity)}
		s.Saturated = spec.Load.Value > capacity
		s.Pass = !s.Saturated
		steps = append(steps, s)
	}
	t.Fatal("the plan never ended")
	return nil, ""
}

func loadsOf(steps []Step) []Load {
	out := make([]Load, len(steps))
	for i, s := range steps {
		out[i] = s.Load
	}
	return out
}

func TestNextRefinesBetweenPassAndFail(t *testing.T) {
	tests := []struct {
		name     string
		plan     Plan
		capacity float64
		want     []float64
		stopped  string
	}{
		{
			name: "rates: coarse until saturated, then bisect geometrically",
			plan: Plan{Mode: OpenLoop, Start: 20, Factor: 2, Max: 320, Refine: 4}, capacity: 53,
			want:    []float64{20, 40, 80, 56.57, 47.57, 51.88, 54.17},
			stopped: "step 3 (80 req/s) saturated the server",
		},
		{
			name: "streams: bisect whole streams until adjacent",
			plan: Plan{Mode: ClosedLoop, Start: 1, Factor: 2, Max: 64, Refine: 5}, capacity: 11,
			want:    []float64{1, 2, 4, 8, 16, 12, 10, 11},
			stopped: "refined to between 11 streams and 12 streams",
		},
		{
			name: "plan ends below capacity: nothing to refine",
			plan: Plan{Mode: OpenLoop, Start: 1, Factor: 2, Max: 4, Refine: 3}, capacity: 100,
			want:    []float64{1, 2, 4},
			stopped: "the plan ended at 4 req/s",
		},
		{
			name: "no refinement asked",
			plan: Plan{Mode: OpenLoop, Loads: []float64{10, 20, 30, 40}}, capacity: 25,
			want:    []float64{10, 20, 30},
			stopped: "step 3 (30 req/s) saturated",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := walk(t, tc.plan, tc.capacity)
			if !slices.Equal(got, tc.want) || !strings.Contains(why, tc.stopped) {
				t.Errorf("loads %v, stopped %q; want %v, %q", got, why, tc.want, tc.stopped)
			}
		})
	}
}

func TestNextStopsOnErrors(t *testing.T) {
	p := Plan{Mode: OpenLoop, Start: 10, Factor: 2, Max: 80}
	steps := []Step{
		{StepSpec: StepSpec{Index: 1, Load: Load{Mode: OpenLoop, Value: 10}}, Pass: true},
		{StepSpec: StepSpec{Index: 2, Load: Load{Mode: OpenLoop, Value: 20}}, ErrorsOver: true, ErrorRate: 0.5},
	}
	if _, ok, why := p.next(steps); ok || !strings.Contains(why, "50.0% errors") {
		t.Errorf("next after an error step: ok %v, %q; want the sweep to stop on errors", ok, why)
	}
}

// TestNextStopsWhenNoRequestSucceeded: a step without a successful
// request (a dead or refusing server) ends the sweep, refinements too.
func TestNextStopsWhenNoRequestSucceeded(t *testing.T) {
	p := Plan{Mode: OpenLoop, Start: 10, Factor: 2, Max: 80, Refine: 3}
	dead := Step{StepSpec: StepSpec{Index: 2, Load: Load{Mode: OpenLoop, Value: 20}}, ErrorsOver: true, ErrorRate: 1,
		Failed: "no request succeeded: connection refused by 127.0.0.1:1: nothing listens on that port"}
	steps := []Step{{StepSpec: StepSpec{Index: 1, Load: Load{Mode: OpenLoop, Value: 10}}, Pass: true, OK: 5}, dead}
	want := "step 2 (20 req/s): no request succeeded: connection refused"
	if _, ok, why := p.next(steps); ok || !strings.HasPrefix(why, want) {
		t.Errorf("next after a failed step: ok %v, %q; want no refinement, %q", ok, why, want)
	}
	// A refinement without a successful request ends the sweep as well.
	dead.Index, dead.Load.Value, dead.Refine = 3, 14.14, true
	steps = []Step{steps[0], {StepSpec: StepSpec{Index: 2, Load: Load{Mode: OpenLoop, Value: 20}}, Saturated: true, OK: 5}, dead}
	if _, ok, why := p.next(steps); ok || !strings.HasPrefix(why, "step 3 (14.14 req/s): no request succeeded") {
		t.Errorf("next after a failed refinement: ok %v, %q; want the sweep to stop", ok, why)
	}
}

func TestBoundaryTakesTheBoundaryFromBelow(t *testing.T) {
	step := func(load float64, pass bool) Step {
		return Step{StepSpec: StepSpec{Load: Load{Mode: OpenLoop, Value: load}}, Pass: pass}
	}
	tests := []struct {
		name       string
		steps      []Step
		best, fail int
	}{
		{"monotone", []Step{step(10, true), step(20, true), step(40, false)}, 1, 2},
		// A lucky pass above a failure does not count.
		{"pass above a failure", []Step{step(100, true), step(119, false), step(130, true), step(141, false)}, 0, 1},
		{"first step fails", []Step{step(10, false), step(20, false)}, -1, 0},
		{"all pass", []Step{step(10, true), step(20, true)}, 1, -1},
		{"run out of order", []Step{step(40, false), step(10, true), step(20, true), step(30, false)}, 2, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			best, fail := boundary(tc.steps)
			if best != tc.best || fail != tc.fail {
				t.Errorf("boundary = %d, %d; want %d, %d", best, fail, tc.best, tc.fail)
			}
		})
	}
}

func TestParse(t *testing.T) {
	if got, err := ParseLoads(" 1, 2,4.5 "); err != nil || !slices.Equal(got, []float64{1, 2, 4.5}) {
		t.Errorf("ParseLoads = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1,,2", "0", "-1", "x", "inf"} {
		if _, err := ParseLoads(bad); err == nil {
			t.Errorf("ParseLoads(%q) took it", bad)
		}
	}
	for in, want := range map[string]float64{"5%": 0.05, "0.05": 0.05, "100%": 1, "0": 0} {
		if got, err := ParseFraction(in); err != nil || got != want {
			t.Errorf("ParseFraction(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "101%", "-1%", "2", "x%", "NaN"} {
		if _, err := ParseFraction(bad); err == nil {
			t.Errorf("ParseFraction(%q) took it", bad)
		}
	}
}
