package sweepjudge

import (
	"strings"
	"testing"
)

func TestLoadFormatting(t *testing.T) {
	for _, tc := range []struct {
		load Load
		want string
	}{
		{Load{OpenLoop, 12}, "12 req/s"},
		{Load{OpenLoop, 118.92071}, "118.9 req/s"},
		{Load{OpenLoop, 0.25}, "0.25 req/s"},
		{Load{ClosedLoop, 1}, "1 stream"},
		{Load{ClosedLoop, 8}, "8 streams"},
	} {
		if got := tc.load.String(); got != tc.want {
			t.Errorf("%+v = %q, want %q", tc.load, got, tc.want)
		}
	}
	if (Load{OpenLoop, 5}).Concurrency() != 0 || (Load{ClosedLoop, 4}).Rate() != 0 || (Load{ClosedLoop, 4}).Concurrency() != 4 {
		t.Error("Rate and Concurrency must each answer only for their own mode")
	}
}

func TestMarkFlatThroughput(t *testing.T) {
	closed := func(c, ok float64) Step {
		return Step{StepSpec: StepSpec{Load: Load{ClosedLoop, c}}, Throughput: ok, Pass: true, Reason: "steady"}
	}
	earlier := []Step{closed(1, 10), closed(2, 19.5), closed(4, 36)}
	s := closed(8, 38)
	markFlatThroughput(&s, earlier, 0.1)
	if !s.Saturated || s.Pass || !strings.Contains(s.Reason, "more streams only wait longer") {
		t.Errorf("8 streams adding 6%% over 4: %+v, want saturated", s)
	}
	s = closed(8, 60)
	markFlatThroughput(&s, earlier, 0.1)
	if s.Saturated || !s.Pass {
		t.Errorf("8 streams adding 67%%: %+v, want not saturated", s)
	}
	open := func(load, ok float64) Step {
		return Step{StepSpec: StepSpec{Load: Load{OpenLoop, load}}, Throughput: ok, Pass: true, Steady: true}
	}
	opened := open(500, 1)
	markFlatThroughput(&opened, []Step{open(10, 10)}, 0.1)
	if opened.Saturated {
		t.Error("open loop saturation is the backlog's call, not throughput's")
	}
}
