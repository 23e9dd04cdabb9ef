package bench

import (
	"net/http"

	"github.com/latscope/latscope/probe"
)

// NewTransport returns a fresh transport as the probe builds it:
// connections that keep the kernel's receive time of each read.
// Each client gets its own, so they never share a connection pool.
func NewTransport() *http.Transport { return probe.NewTransport() }

// NewPlainTransport returns a fresh transport with the probe's settings and
// plain connections: the bare client's, so that it is what a plain net/http
// client does with the bytes, stamped with time.Now after each read.
func NewPlainTransport() *http.Transport { return probe.NewPlainTransport() }
