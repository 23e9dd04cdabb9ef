package probe

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// A Pacer decides when each open-loop request is due, in the shape of
// vegeta's lib/pacer.go: given the time since the run began and the number of
// requests already sent, it returns how long to wait before sending the next
// one, or stop when the schedule is over.
//
// Unlike vegeta's pacers, a wait may be negative: it then says how late the
// next request already is, so elapsed+wait is always the request's intended
// send time and the Runner can record its lateness instead of losing it.
//
// Pacers are not safe for concurrent use; the Runner calls Pace from one
// goroutine with a non-decreasing hits.
type Pacer interface {
	Pace(elapsed time.Duration, hits uint64) (wait time.Duration, stop bool)
}

// Arrival processes accepted by NewPacer.
const (
	ArrivalPoisson  = "poisson"  // exponential gaps: independent users
	ArrivalConstant = "constant" // evenly spaced
	ArrivalGamma    = "gamma"    // gamma gaps; shape = burstiness
)

// NewPacer returns the pacer for an arrival process at rate requests per
// second. burstiness is the gamma shape (1 = poisson, below 1 burstier,
// above 1 smoother) and is only used by "gamma". The empty arrival means
// poisson. The same seed always gives the same schedule.
func NewPacer(arrival string, rate, burstiness float64, seed int64) (Pacer, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("invalid rate %v: want a positive number of requests per second", rate)
	}
	switch arrival {
	case ArrivalConstant:
		return ConstantPacer{Rate: rate}, nil
	case ArrivalPoisson, "":
		if burstiness != 0 && burstiness != 1 {
			return nil, fmt.Errorf("burstiness %v applies to gamma arrivals only (poisson is burstiness 1)", burstiness)
		}
		return NewGammaPacer(rate, 1, seed)
	case ArrivalGamma:
		if burstiness == 0 {
			burstiness = 1
		}
		return NewGammaPacer(rate, burstiness, seed)
	}
	return nil, fmt.Errorf("unknown arrival process %q: want poisson, constant or gamma", arrival)
}

// ConstantPacer sends Rate requests per second, evenly spaced, the first at
// the start.
type ConstantPacer struct {
	Rate float64 // requests per second
}

var _ Pacer = ConstantPacer{}

// Pace implements Pacer.
func (cp ConstantPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if !(cp.Rate > 0) {
		return 0, true
	}
	due := float64(hits) / cp.Rate * float64(time.Second)
	if due >= math.MaxInt64 {
		return 0, true
	}
	return time.Duration(due) - elapsed, false
}

// GammaPacer spaces requests by independent gamma-distributed gaps with mean
// 1/Rate. Shape 1 is a Poisson process (exponential gaps, coefficient of
// variation 1); in general the gaps' coefficient of variation is
// 1/sqrt(shape), so a shape below 1 gives bursts and one above 1 a steadier
// stream. The first request is due at the start.
type GammaPacer struct {
	rate  float64
	shape float64
	seed  int64

	rng  *rand.Rand
	next uint64        // the hit whose due time is in due
	due  time.Duration // offset of hit next from the start
}

var _ Pacer = (*GammaPacer)(nil)

// NewGammaPacer returns a GammaPacer; shape must be positive.
func NewGammaPacer(rate, shape float64, seed int64) (*GammaPacer, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("invalid rate %v: want a positive number of requests per second", rate)
	}
	if !(shape > 0) || math.IsInf(shape, 0) {
		return nil, fmt.Errorf("invalid burstiness %v: want a positive gamma shape (1 = poisson)", shape)
	}
	p := &GammaPacer{rate: rate, shape: shape, seed: seed}
	p.reset()
	return p, nil
}

func (p *GammaPacer) reset() {
	p.rng = rand.New(rand.NewPCG(uint64(p.seed), 0x9e3779b97f4a7c15))
	p.next, p.due = 0, 0
}

// Pace implements Pacer.
func (p *GammaPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits < p.next {
		// Only a caller going backwards gets here; replaying the seeded
		// sequence keeps the schedule identical.
		p.reset()
	}
	for p.next < hits {
		gap := p.gap()
		if float64(p.due)+gap >= math.MaxInt64 {
			return 0, true
		}
		p.due += time.Duration(gap)
		p.next++
	}
	return p.due - elapsed, false
}

// gap draws one gap in nanoseconds: gamma(shape, scale) with scale chosen so
// the mean is 1/rate.
func (p *GammaPacer) gap() float64 {
	scale := float64(time.Second) / (p.rate * p.shape)
	return sampleGamma(p.rng, p.shape) * scale
}

// sampleGamma draws from a gamma distribution with the given shape and scale
// 1, by Marsaglia and Tsang's method; shapes below 1 use the boost
// gamma(k) = gamma(k+1) * U^(1/k).
func sampleGamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return sampleGamma(rng, shape+1) * math.Pow(u, 1/shape)
	}
	if shape == 1 {
		return rng.ExpFloat64()
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
