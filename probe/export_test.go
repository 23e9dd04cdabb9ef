package probe

import "time"

// SetLagClock makes r's scheduling-lag watch read now instead of
// time.Now: a test holds the probe up by making now block, as a starved
// machine holds up every goroutine.
func SetLagClock(r *Runner, now func() time.Time) { r.lagClock = now }
