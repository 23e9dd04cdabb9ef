package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/latscope/latscope/event"
	"github.com/latscope/latscope/pipeline"
	"github.com/latscope/latscope/probe"
)

// OpenWatch opens a session that watches the server's own traffic: its
// metrics (and, with OTLPListen, its spans), the GPUs and the client host,
// with no load of its own. It lasts for duration, or until ctx ends when
// duration is 0. Only the collectors' options of o are read; the server is
// asked what it is, but a server that does not say is still watched.
func OpenWatch(ctx context.Context, progress io.Writer, o Options, duration time.Duration) (_ *Session, err error) {
	if o.Metrics.Off {
		return nil, errors.New("watch reads the server's metrics: --no-metrics leaves nothing to watch")
	}
	// No load of its own: every span is one of the users'.
	o.Watch, o.Load = true, probe.LoadConfig{}
	s := &Session{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	setup := probe.NewHTTPClient(o.Conn.TLS)
	s.closers = append(s.closers, setup.CloseIdleConnections)
	id, err := identify(ctx, o.Conn, o.Conn.Endpoint(setup), "auto", o.Model)
	if ierr := interrupted(ctx, "finding out what server runs at "+o.Conn.Shown); ierr != nil {
		return nil, ierr
	}
	if err != nil {
		fmt.Fprintf(progress, "latscope: %v; watching its metrics anyway\n", err)
		id = identity{server: "unknown", dialect: "unknown", model: o.Model}
	}
	fmt.Fprintf(progress, "latscope: watching %s (server %s, model %q): its own traffic, no load sent\n", o.Conn.Shown, id.server, id.model)
	metricsURL, err := s.addCollectors(ctx, progress, o, id)
	if err != nil {
		return nil, err
	}
	s.Primary = []pipeline.Source{waitSource(duration)}
	host, _ := os.Hostname()
	s.Header = &event.Session{
		Time: time.Now(), Latscope: o.Version, Name: host, Host: host,
		Target: o.Conn.Shown, MetricsURL: event.RedactURL(metricsURL),
		Server: id.server, Dialect: id.dialect, Model: id.model,
		Simulated: probe.IsLatscopeSim(id.server),
		Load:      event.Load{Mode: event.LoadWatch, Duration: duration},
	}
	return s, nil
}

// waitSource is a primary source that emits nothing and ends after d, or
// when ctx ends (d 0: only then).
func waitSource(d time.Duration) pipeline.Source {
	return pipeline.SourceFunc(func(ctx context.Context, _ func(event.Event)) error {
		if d <= 0 {
			<-ctx.Done()
			return nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	})
}

// OpenCanary opens a session that watches the server's own traffic beside
// a canary: o's load, whose requests are marked as the canary's
// (MarkCanary), and, with OTLPListen, the spans none of them claims as
// the users' requests.
func OpenCanary(ctx context.Context, progress io.Writer, o Options) (*Session, error) {
	o.Watch = true
	s, err := Open(ctx, progress, o)
	if err != nil {
		return nil, err
	}
	s.MarkCanary()
	return s, nil
}

// MarkCanary makes the session's load a canary beside the server's own
// traffic: every request record its primary sources emit carries
// event.FlagCanary, and the header says the session watches (load mode
// event.LoadCanary). Call it after Open, before the run.
func (s *Session) MarkCanary() {
	for i, src := range s.Primary {
		s.Primary[i] = pipeline.SourceFunc(func(ctx context.Context, emit func(event.Event)) error {
			return src.Run(ctx, func(ev event.Event) {
				if ev.Request != nil && !ev.Request.HasFlag(event.FlagCanary) {
					ev.Request.Flags = append(ev.Request.Flags, event.FlagCanary)
				}
				emit(ev)
			})
		})
	}
	if s.Header != nil {
		s.Header.Load.Mode = event.LoadCanary
	}
}
