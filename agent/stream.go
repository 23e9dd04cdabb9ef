package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// serveEvents streams the ring to one client, from its own cursor, in its
// own goroutine (the one net/http gave the request). Nothing it does holds
// up the publisher or another client: it copies frames out of the ring
// under a short lock and writes them with a deadline.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !s.allow(w, r, "/events") {
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	c, err := s.cursorFor(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if n := s.clients.Add(1); n > int64(s.cfg.MaxClients) {
		s.clients.Add(-1)
		s.refuseBusy(w, r)
		return
	}
	defer s.clients.Add(-1)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	h.Set(StreamHeader, s.streamID)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	s.metrics.connections.Inc()
	s.metrics.clients.Inc()
	defer s.metrics.clients.Dec()
	err = s.stream(r.Context(), w, rc, c)
	if err != nil && !errors.Is(err, context.Canceled) && !stopping(r.Context()) {
		s.metrics.clientsDropped.Inc()
		s.log.Info("dropped an event-stream client", "remote", r.RemoteAddr, "err", err)
	}
	if s.clientGone != nil {
		s.clientGone(err)
	}
}

// serveCtxKey holds Serve's context in every request's context, so that a
// stream can tell the agent stopping from its client failing.
type serveCtxKey struct{}

// stopping reports whether the Serve that ctx's request came through is
// shutting down.
func stopping(ctx context.Context) bool {
	serving, ok := ctx.Value(serveCtxKey{}).(context.Context)
	return ok && serving.Err() != nil
}

// cursorFor reads where the client wants to resume: after Last-Event-ID,
// unless it is new or the id is from an earlier run of the agent.
func (s *Server) cursorFor(r *http.Request) (cursor, error) {
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		return s.ring.cursorFor(0, false), nil
	}
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return cursor{}, fmt.Errorf("Last-Event-ID must be a decimal event id from this agent")
	}
	if run := r.Header.Get(StreamHeader); run != "" && run != s.streamID {
		return s.ring.cursorFor(0, false), nil
	}
	return s.ring.cursorFor(id, true), nil
}

// stream writes frames as the ring gets them until the client goes (ctx
// ends), the session ends or a write fails.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, c cursor) error {
	// Flush the headers now, so the client knows it is connected even
	// before the first event.
	if err := s.write(ctx, w, rc, nil); err != nil {
		return err
	}
	// A write blocked on a client that stopped reading would otherwise hold
	// the handler, and the agent's shutdown, until its deadline.
	if serving, ok := ctx.Value(serveCtxKey{}).(context.Context); ok {
		stop := context.AfterFunc(serving, func() { _ = rc.SetWriteDeadline(time.Now()) })
		defer stop()
	}
	heartbeat := time.NewTimer(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	var batch []frame
	for {
		var wake <-chan struct{}
		batch, wake = s.ring.read(&c, batch[:0])
		if len(batch) > 0 {
			if err := s.write(ctx, w, rc, batch); err != nil {
				return err
			}
			if batch[len(batch)-1].end {
				return nil
			}
			heartbeat.Reset(s.cfg.Heartbeat)
			continue
		}
		select {
		case <-wake:
		case <-heartbeat.C:
			if err := s.write(ctx, w, rc, []frame{{b: heartbeatFrame}}); err != nil {
				return err
			}
			heartbeat.Reset(s.cfg.Heartbeat)
		case <-ctx.Done():
			return nil
		}
	}
}

// write sends frames and flushes them, all within the write timeout, so a
// client that stopped reading is found out and dropped.
func (s *Server) write(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, frames []frame) error {
	if err := rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
		return fmt.Errorf("set write deadline: %w", err)
	}
	// Checked after the deadline is set: a cancellation from now on cuts
	// the write short (see stream).
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, f := range frames {
		if _, err := w.Write(f.b); err != nil {
			return fmt.Errorf("write event stream: %w", err)
		}
		if f.lost > 0 {
			s.metrics.gaps.Inc()
			s.metrics.eventsDropped.Add(float64(f.lost))
		}
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush event stream: %w", err)
	}
	return nil
}

// busyLogEvery is the least time between two log lines about clients
// refused for MaxClients: a flood of them must not flood the log too.
const busyLogEvery = 10 * time.Second

// refuseBusy answers 503 to a client over MaxClients, and logs it at most
// once every busyLogEvery with the count since the last line.
func (s *Server) refuseBusy(w http.ResponseWriter, r *http.Request) {
	n := s.busy.Add(1)
	now := time.Now().UnixNano()
	if last := s.busyLogged.Load(); now-last >= int64(busyLogEvery) && s.busyLogged.CompareAndSwap(last, now) {
		s.log.Warn("refused event-stream clients: too many at once", "max_clients", s.cfg.MaxClients, "refused_in_all", n, "remote", r.RemoteAddr)
	}
	w.Header().Set("Retry-After", "10")
	http.Error(w, fmt.Sprintf("too many event-stream clients (at most %d); try again later", s.cfg.MaxClients), http.StatusServiceUnavailable)
}
