package session

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// Seed is --seed: the seed of a run's prompts and arrivals, given or,
// by default, drawn for the run. The same seed sends the same prompts, so a
// seed that never changed would let a server's prompt cache serve every run
// after the first; the session header says which seed a run used.
type Seed struct {
	n     int64
	given bool // set with --seed
	drawn bool // drawn at random for this run
}

// maxDrawnSeed bounds drawn seeds, so they stay short enough to type.
const maxDrawnSeed = 1_000_000_000

func (s *Seed) Set(v string) error {
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return fmt.Errorf("want an integer: %w", err)
	}
	s.n, s.given, s.drawn = n, true, false
	return nil
}

func (s *Seed) String() string {
	if !s.given && !s.drawn {
		return "random"
	}
	return strconv.FormatInt(s.n, 10)
}

func (s *Seed) Type() string { return "int" }

// Value is the run's seed: the given one, else one drawn the first time
// it is asked for.
func (s *Seed) Value() int64 {
	if !s.given && !s.drawn {
		s.n, s.drawn = rand.Int64N(maxDrawnSeed)+1, true
	}
	return s.n
}

// Given reports whether the seed was set (--seed).
func (s *Seed) Given() bool { return s.given }

// Drawn reports whether the seed was drawn for this run.
func (s *Seed) Drawn() bool { return s.drawn }
