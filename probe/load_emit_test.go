package probe

import (
	"sync"
	"testing"
	"time"

	"github.com/latscope/latscope/event"
)

// orderCollector keeps every event Run emits, in order.
type orderCollector struct {
	mu  sync.Mutex
	evs []event.Event
}

func (c *orderCollector) emit(ev event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, ev)
}

// The probe's samples carry the requests still in flight, each once and
// before its record (the stall detector waits for those records), every
// open-loop send's lateness once, and the stretches its goroutines ran
// late; the first event is a sample, before any request.
func TestProbeSamplesCarryTheRawEvidence(t *testing.T) {
	onVirtualClock(t, func(t *testing.T) {
		var mu sync.Mutex
		reads := 0
		clock := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			if reads++; reads == 10 {
				time.Sleep(50 * time.Millisecond) // the probe held up once, as a starved host would
			}
			return time.Now()
		}
		d := &sleepDoer{delay: 1500 * time.Millisecond}
		r, err := NewRunner(d, LoadConfig{Rate: 4, Arrival: ArrivalConstant, Requests: 12, LagClock: clock}, loadTestPrompts(t))
		if err != nil {
			t.Fatal(err)
		}
		var c orderCollector
		if err := r.Run(t.Context(), c.emit); err != nil {
			t.Fatal(err)
		}
		if len(c.evs) == 0 || c.evs[0].Probe == nil {
			t.Fatalf("first event %+v, want a probe sample", c.evs[0])
		}
		announced := map[string]int{} // id → index of the sample that listed it
		recorded := map[string]int{}
		lags, late := 0, 0
		for i, ev := range c.evs {
			switch {
			case ev.Probe != nil:
				p := ev.Probe
				if p.Raw != event.ProbeRawV1 || p.Cores <= 0 {
					t.Fatalf("sample %+v: want raw evidence and the machine's cores", p)
				}
				for _, s := range p.Sent {
					if _, ok := announced[s.ID]; ok {
						t.Fatalf("%s announced twice", s.ID)
					}
					if _, ok := recorded[s.ID]; ok {
						t.Fatalf("%s announced after its record", s.ID)
					}
					announced[s.ID] = i
				}
				lags += len(p.SendLags)
				for _, l := range p.Late {
					if !l.To.After(l.From) {
						t.Fatalf("late stretch %+v", l)
					}
					late++
				}
			case ev.Request != nil:
				recorded[ev.Request.ID] = i
			}
		}
		if len(recorded) != 12 || lags != 12 {
			t.Fatalf("%d records, %d send lags; want 12 of each", len(recorded), lags)
		}
		// Each request takes 1.5 s, sends are 250 ms apart and samples 1 s
		// apart: every request is in flight at some sample.
		if len(announced) != 12 {
			t.Fatalf("%d of 12 requests announced in flight: %v", len(announced), announced)
		}
		if late == 0 {
			t.Error("the probe was held up 50 ms, but no sample says it ran late")
		}
	})
}

// The evidence lists keep exactly the newest limit values, in order, and
// never hold more than twice limit.
func TestAppendLatestKeepsTheNewest(t *testing.T) {
	const limit = 8
	var list []int
	for v := range 100 {
		list = appendLatest(list, v, limit)
		if len(list) > 2*limit {
			t.Fatalf("after %d: %d held, want ≤ %d", v, len(list), 2*limit)
		}
		got := latestOf(list, limit)
		want := min(v+1, limit)
		if len(got) != want || got[len(got)-1] != v || got[0] != v+1-want {
			t.Fatalf("after %d: latest %v", v, got)
		}
	}
}
