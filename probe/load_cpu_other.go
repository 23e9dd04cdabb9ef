//go:build !unix

package probe

import "time"

// processCPUTime is not available on this platform; the probe then reports
// no CPU figure rather than a wrong one.
func processCPUTime() (time.Duration, bool) { return 0, false }
