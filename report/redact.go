package report

import (
	"regexp"
	"slices"

	"github.com/latscope/latscope/aggregate"
	"github.com/latscope/latscope/event"
)

// Credentials are removed before a session is recorded. The report removes
// them once more from what it prints, in case a recording was written by
// another tool or an older build: URLs go through event.RedactURL, and any
// user:password@ inside free text (error and marker messages) is replaced.

// userinfo matches the credentials part of a URL inside text.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@"']+@`)

func redactText(s string) string { return userinfo.ReplaceAllString(s, "${1}REDACTED@") }

func redactURL(s string) string {
	if s == "" {
		return ""
	}
	return event.RedactURL(s)
}

// redactSummary returns s with its URLs and messages redacted. It copies
// what it changes, so the aggregator's values are left alone.
func redactSummary(s aggregate.Summary) aggregate.Summary {
	if s.Session != nil {
		h := *s.Session
		h.Target, h.MetricsURL = redactURL(h.Target), redactURL(h.MetricsURL)
		s.Session = &h
	}
	s.Server.Source = redactURL(s.Server.Source)
	s.Server.LastError = redactText(s.Server.LastError)
	s.Requests.TopErrors = slices.Clone(s.Requests.TopErrors)
	for i := range s.Requests.TopErrors {
		s.Requests.TopErrors[i].Message = redactText(s.Requests.TopErrors[i].Message)
	}
	s.Markers.Recent = redactMarkers(s.Markers.Recent)
	s.Insights = redactMarkers(s.Insights)
	return s
}

func redactMarkers(ms []event.Marker) []event.Marker {
	if ms == nil {
		return nil
	}
	out := slices.Clone(ms)
	for i := range out {
		out[i].Message = redactText(out[i].Message)
		out[i].Source = redactText(out[i].Source)
	}
	return out
}
