package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ClockPath serves the agent's clock, for attach's estimate of how far it
// is from the local one. It needs the token, as /events does.
const ClockPath = "/clock"

// clockReading is ClockPath's answer: the agent's clock, and who read it
// (its --name, --region and --shard), so that attach can name an agent and
// say where it measures from before its session header arrives.
type clockReading struct {
	UnixNano int64  `json:"unix_nano"`
	Name     string `json:"name,omitempty"`
	Region   string `json:"region,omitempty"`
	Shard    string `json:"shard,omitempty"`
}

func (s *Server) serveClock(w http.ResponseWriter, r *http.Request) {
	if !s.allow(w, r, ClockPath) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	id := s.cfg.Identity
	_ = json.NewEncoder(w).Encode(clockReading{UnixNano: s.cfg.Now().UnixNano(), Name: id.Name, Region: id.Region, Shard: id.Shard})
}

// ClockOffset is how far an agent's clock is from the local one.
type ClockOffset struct {
	// Offset is the agent's clock minus the local clock: an agent
	// timestamp minus Offset is the local time of the same instant.
	Offset time.Duration
	// RTT is the round trip of the ping Offset came from. The agent read
	// its clock somewhere within it, so Offset is off by at most RTT/2.
	RTT     time.Duration
	Samples int
}

// Bound is the most Offset can be off by.
func (o ClockOffset) Bound() time.Duration { return o.RTT / 2 }

// EstimateClockOffset pings the agent's clock n times (NTP-style: the local
// time before and after each, the agent's in between) and keeps the ping
// with the shortest round trip, whose midpoint is the closest to when the
// agent read its clock. now is the local clock (time.Now when nil); each
// ping is bounded by the client's ConnectTimeout.
func (c *Client) EstimateClockOffset(ctx context.Context, n int, now func() time.Time) (ClockOffset, error) {
	if now == nil {
		now = time.Now
	}
	clockURL, err := clockURLFor(c.url)
	if err != nil {
		return ClockOffset{}, err
	}
	best := ClockOffset{RTT: -1}
	var errs []error
	for range max(n, 1) {
		off, rtt, who, err := c.ping(ctx, clockURL, now)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil || errors.Is(err, ErrUnauthorized) {
				break
			}
			continue
		}
		best.Samples++
		if best.RTT < 0 || rtt < best.RTT {
			best.Offset, best.RTT = off, rtt
		}
		c.identified(who)
	}
	if best.Samples == 0 {
		return ClockOffset{}, fmt.Errorf("estimate %s's clock: %w", c.display, errors.Join(errs...))
	}
	return best, nil
}

func (c *Client) ping(ctx context.Context, clockURL string, now func() time.Time) (offset, rtt time.Duration, who clockReading, err error) {
	limit := c.cfg.ConnectTimeout
	if limit <= 0 {
		limit = 15 * time.Second // the client's own limit on response headers
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clockURL, nil)
	if err != nil {
		return 0, 0, who, err
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	sent := now()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, 0, who, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	received := now()
	switch {
	case err != nil:
		return 0, 0, who, err
	case resp.StatusCode == http.StatusUnauthorized:
		return 0, 0, who, ErrUnauthorized
	case resp.StatusCode != http.StatusOK:
		return 0, 0, who, fmt.Errorf("%s: %s (an agent older than its clock endpoint?)", ClockPath, resp.Status)
	}
	var r clockReading
	if err := json.Unmarshal(body, &r); err != nil || r.UnixNano == 0 {
		return 0, 0, who, fmt.Errorf("%s: %w: %q", ClockPath, ErrProtocol, body)
	}
	rtt = received.Sub(sent)
	mid := sent.Add(rtt / 2).Round(0) // the wall clock, as the agent's reading is
	return time.Unix(0, r.UnixNano).Sub(mid), rtt, r, nil
}

// clockEstimateLimit bounds one estimate of an agent's clock, all its
// pings together: meanwhile the connection's events wait.
const clockEstimateLimit = 5 * time.Second

// estimateClock estimates the agent's clock offset for a new connection,
// before its events are emitted, and keeps it in the status: the events
// that follow are dated by the clock as it is now (it may have been
// stepped, or the agent restarted on another host, since the last
// connection). A failed estimate keeps the last known offset and says why.
func (c *Client) estimateClock(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, clockEstimateLimit)
	defer cancel()
	off, err := c.EstimateClockOffset(ctx, c.cfg.ClockPings, c.cfg.Now)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.ClockEstimates++
	if err != nil {
		c.st.ClockErr = err.Error()
		return
	}
	c.st.Clock, c.st.ClockKnown, c.st.ClockErr = off, true, ""
}

// ClockOffset returns the agent's clock offset as last estimated (see
// ClientConfig.ClockPings), and whether one is known. Called from emit, it
// is the offset of the connection the event came on.
func (c *Client) ClockOffset() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Clock.Offset, c.st.ClockKnown
}

// identified notes who the agent says it is, from its clock reading: its
// region and shard, and its name until a session header gives one.
func (c *Client) identified(who clockReading) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if who.Name != "" && !c.named {
		c.st.Name = who.Name
	}
	c.st.Region, c.st.Shard = who.Region, who.Shard
}

// clockURLFor is the clock URL beside an agent's events URL.
func clockURLFor(events string) (string, error) {
	u, err := url.Parse(events)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/events") + ClockPath
	u.RawQuery = ""
	return u.String(), nil
}
