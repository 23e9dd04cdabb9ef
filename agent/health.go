package agent

import (
	"encoding/json"
	"net/http"
)

// Health is what /healthz answers with the token (or when the agent needs
// none). Without the token, /healthz says only that the agent is alive
// ({"status":"ok"}), so that a load balancer or a supervisor can probe it
// while its counters stay with those who hold the token.
type Health struct {
	Status          string  `json:"status"` // "ok", or "ended" once the session is over
	UptimeSeconds   float64 `json:"uptime_s"`
	EventsPublished uint64  `json:"events_published"`
	Clients         int64   `json:"clients"`
	RingEvents      int     `json:"ring_events"`
}

// Health returns the agent's state as /healthz reports it.
func (s *Server) Health() Health {
	rs := s.ring.stats()
	h := Health{
		Status:          "ok",
		UptimeSeconds:   s.cfg.Now().Sub(s.started).Seconds(),
		EventsPublished: rs.Published,
		Clients:         s.clients.Load(),
		RingEvents:      rs.Events,
	}
	if rs.Ended {
		h.Status = "ended"
	}
	return h
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	if !s.auth.allows(r) {
		// Liveness only: not a refusal, so neither counted nor logged.
		_ = json.NewEncoder(w).Encode(struct {
			Status string `json:"status"`
		}{"ok"})
		return
	}
	_ = json.NewEncoder(w).Encode(s.Health())
}
