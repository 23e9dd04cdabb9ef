package probe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Shard is one agent's share of a fleet's load: N agents, each given its
// Index (0 to Count-1) and the same seed, send between them exactly the
// load one agent would send alone. In open loop every agent draws the
// whole fleet's schedule (the same seed, the whole rate) and sends the
// arrivals whose number modulo Count is its Index, so the union of the
// fleet's arrivals is one agent's schedule at the whole rate, not N
// independent schedules whose bursts would line up by chance. In closed
// loop the streams are dealt out the same way, and so is --requests.
type Shard struct {
	Index int // 0-based, as Kubernetes' JOB_COMPLETION_INDEX
	Count int // 0 or 1: not sharded
}

// ParseShard reads "i/N" (0 <= i < N); "" is no shard.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	is, ns, ok := strings.Cut(s, "/")
	i, errI := strconv.Atoi(strings.TrimSpace(is))
	n, errN := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || errI != nil || errN != nil {
		return Shard{}, fmt.Errorf("shard %q: want i/N, e.g. 0/3 for the first of three agents", s)
	}
	sh := Shard{Index: i, Count: n}
	return sh, sh.validate()
}

func (s Shard) validate() error {
	if s.Count < 0 || s.Count > 0 && (s.Index < 0 || s.Index >= s.Count) || s.Count == 0 && s.Index != 0 {
		return fmt.Errorf("shard %d/%d: want 0 <= i < N", s.Index, s.Count)
	}
	return nil
}

// String is "i/N", or "" when not sharded.
func (s Shard) String() string {
	if !s.sharded() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

func (s Shard) sharded() bool { return s.Count > 1 }

// Share is this shard's part of n things dealt out in turn: n/Count, plus
// one for the first n%Count shards. The shares of all shards add up to n.
func (s Shard) Share(n int) int {
	if !s.sharded() {
		return n
	}
	share := n / s.Count
	if s.Index < n%s.Count {
		share++
	}
	return share
}

// ShardPacer sends one shard's arrivals of the Whole fleet's schedule: the
// shard's hit h is the fleet's hit h*Count+Index.
type ShardPacer struct {
	Whole Pacer
	Shard Shard
}

var _ Pacer = ShardPacer{}

// Pace implements Pacer.
func (p ShardPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	return p.Whole.Pace(elapsed, hits*uint64(p.Shard.Count)+uint64(p.Shard.Index))
}

// waitForStart waits until StartAt, or until ctx ends. A StartAt already
// past starts at once: an agent that came late (a restarted pod) sends its
// share of the schedule from its own start, not a burst to catch up.
func (r *Runner) waitForStart(ctx context.Context) {
	if wait := time.Until(r.cfg.StartAt); !r.cfg.StartAt.IsZero() && wait > 0 {
		r.pause(ctx, wait)
	}
}

// applyShard narrows the Runner to its shard of the load, once its pacer
// (for the whole fleet) is set.
func (r *Runner) applyShard() error {
	sh := r.cfg.Shard
	if err := sh.validate(); err != nil {
		return err
	}
	if !sh.sharded() {
		return nil
	}
	if len(r.cfg.Steps) > 0 {
		return errors.New("a stepped load cannot be sharded yet: give each agent its own --steps")
	}
	if r.pacer != nil {
		r.pacer = ShardPacer{Whole: r.pacer, Shard: sh}
	} else {
		n := sh.Share(r.cfg.Concurrency)
		if n < 1 {
			return fmt.Errorf("shard %s of %d streams: none left for this agent; give at least %d streams", sh, r.cfg.Concurrency, sh.Count)
		}
		r.cfg.Concurrency = n
		r.level = newLevel(n)
	}
	if r.cfg.Requests > 0 {
		n := sh.Share(r.cfg.Requests)
		if n == 0 {
			return fmt.Errorf("shard %s of %d requests: none left for this agent", sh, r.cfg.Requests)
		}
		r.cfg.Requests = n
	}
	return nil
}
