package bench

import (
	"net/http"

	"github.com/latscope/latscope/probe"
)

// NewTransport returns a fresh transport with the probe's default settings,
// so the bare client and the probe differ only in what they do with the
// bytes. Each client gets its own, so they never share a connection pool.
func NewTransport() *http.Transport { return probe.NewTransport() }
