package session

import (
	"io"
	"testing"

	"github.com/latscope/latscope/aggregate"
)

func TestAllFailed(t *testing.T) {
	for _, tc := range []struct {
		r    aggregate.Requests
		want string
	}{
		{aggregate.Requests{Sent: 3, Errors: 3}, "all 3 requests failed"},
		{aggregate.Requests{Sent: 5, Errors: 3, CancelledAtEnd: 2}, "all 3 finished requests failed; 2 more were cancelled at the end of the run"},
	} {
		if got := AllRequestsFailed(aggregate.Summary{Requests: tc.r}).Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
	err := Outcome(io.Discard, aggregate.Summary{Requests: aggregate.Requests{Sent: 2, CancelledAtEnd: 2}}, nil, false, nil)
	if ReasonOf(err) != AllFailed {
		t.Errorf("a run whose requests the run's end all cancelled: %v, want AllFailed: none succeeded", err)
	}
	err = Outcome(io.Discard, aggregate.Summary{Requests: aggregate.Requests{Sent: 2, CancelledAtEnd: 2}}, nil, true, nil)
	if ReasonOf(err) != Interrupted {
		t.Errorf("the same, interrupted: %v, want Interrupted", err)
	}
	if err := Outcome(io.Discard, aggregate.Summary{Requests: aggregate.Requests{Sent: 3, OK: 1, CancelledAtEnd: 2}}, nil, false, nil); err != nil {
		t.Errorf("a run with one success and two cancelled at its end: %v, want done", err)
	}
}
