package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/latscope/latscope/event"
)

// The requests view names the run's prompt-length buckets, and
// prompt=LO-HI keeps the requests of one.
func TestRequestsFilterByLengthBucket(t *testing.T) {
	s := newSynth(synthOpts{perSec: 20})
	add := s.emit
	s.emit = func(ev event.Event) {
		if ev.Request != nil && ev.Request.Seq%2 == 0 {
			r := *ev.Request
			r.PromptTokens = 900 // the long half
			ev = event.NewRequest(&r)
		}
		add(ev)
	}
	feed := &stepFeed{}
	m := newModel(feed, Options{}, plainRenderer())
	m.Update(sizeMsg(160, 60))
	for range 5 {
		s.advance(1)
		feed.set(s.frame())
		m.Update(tickMsg{})
	}
	press(m, "tab")
	v := ansi.Strip(m.View())
	if !strings.Contains(v, "by length") || !strings.Contains(v, "prompt=257-512 ×") || !strings.Contains(v, "513-1024 ×") {
		t.Fatalf("the requests view does not name the length buckets:\n%s", v)
	}
	press(m, "/")
	for _, r := range "prompt=513-1024" {
		press(m, string(r))
	}
	press(m, "enter")
	if len(m.list.rows) == 0 {
		t.Fatal("the filter kept no request")
	}
	for _, r := range m.list.rows {
		if r.PromptTokens != 900 {
			t.Fatalf("prompt=513-1024 kept a request of %d prompt tokens", r.PromptTokens)
		}
	}
}

func TestParseLengthFilter(t *testing.T) {
	for _, tc := range []struct {
		text    string
		in, out int
		bad     bool
	}{
		{text: "prompt=513-1024", in: 600, out: 1025},
		{text: "prompt=1025+", in: 5000, out: 1024},
		{text: "output=7", in: 7, out: 8},
		{text: "prompt=1024-513", bad: true},
		{text: "prompt=lots", bad: true},
	} {
		f, err := parseFilter(tc.text)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.text)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		at := func(n int) *event.Request {
			if strings.HasPrefix(tc.text, "prompt") {
				return &event.Request{PromptTokens: n, Outcome: event.OutcomeOK}
			}
			return &event.Request{OutputTokens: n, Outcome: event.OutcomeOK}
		}
		if !f.keep(at(tc.in), "") || f.keep(at(tc.out), "") {
			t.Errorf("%q: keeps %d %v, %d %v", tc.text, tc.in, f.keep(at(tc.in), ""), tc.out, f.keep(at(tc.out), ""))
		}
	}
}
