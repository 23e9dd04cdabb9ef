//go:build !unix

package bench

import (
	"errors"
	"time"
)

// processCPU is not available here; CPU per token is then reported as 0.
func processCPU() (time.Duration, error) {
	return 0, errors.New("process CPU time is only measured on unix")
}
