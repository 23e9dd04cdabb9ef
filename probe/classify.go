package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/latscope/latscope/event"
)

// errRequestTimeout is the cause of a request context whose
// ClientConfig.Timeout passed, to tell it from the caller's own deadline or
// cancellation.
var errRequestTimeout = errors.New("request timeout")

// contextOutcome reports a failure caused by a context: the caller's
// cancellation (cancelled), the caller's deadline or the request's Timeout
// (timeout). ok is false when neither context is done.
func contextOutcome(parent, req context.Context) (out event.Outcome, msg string, ok bool) {
	if err := parent.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return event.OutcomeTimeout, "caller's deadline passed", true
		}
		return event.OutcomeCancelled, fmt.Sprintf("cancelled: %v", context.Cause(parent)), true
	}
	if req.Err() != nil && errors.Is(context.Cause(req), errRequestTimeout) {
		return event.OutcomeTimeout, "request timeout passed", true
	}
	return "", "", false
}

// sendOutcome classifies an error from sending the request, before any
// response: without a connection it could not connect; with one, the server
// closed or reset it before answering.
func sendOutcome(err error, gotConn bool) (event.Outcome, string) {
	var dnsErr *net.DNSError
	var recordErr tls.RecordHeaderError
	var verifyErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	msg := describeError(err)
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &recordErr), errors.As(err, &verifyErr),
		errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		return event.OutcomeConnect, msg
	case !gotConn:
		return event.OutcomeConnect, msg
	}
	return event.OutcomeStreamReset, "connection closed before response headers: " + msg
}

// streamOutcome classifies an error from reading the stream. end names the
// dialect's end marker for the message.
func streamOutcome(err error, end string) (event.Outcome, string) {
	var tooLarge *eventTooLargeError
	var serverErr *serverEventError
	var tooMany *tooManyTokensError
	switch {
	case errors.As(err, &tooMany):
		return event.OutcomeMalformed, err.Error()
	case errors.As(err, &serverErr):
		return event.OutcomeServerError, err.Error()
	case errors.As(err, &tooLarge):
		return event.OutcomeOversized, err.Error()
	case errors.Is(err, errMalformed):
		return event.OutcomeMalformed, err.Error()
	case errors.Is(err, io.EOF):
		return event.OutcomeStreamReset, "stream ended before " + end
	case errors.Is(err, io.ErrUnexpectedEOF):
		return event.OutcomeStreamReset, "stream cut off before " + end
	}
	return event.OutcomeStreamReset, "read stream: " + err.Error()
}
