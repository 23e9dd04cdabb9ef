package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/latscope/latscope/session"
)

// TestExitCodes: one table for every command; a signal makes the exit 130
// whatever else the command returned, and keeps real failures visible.
func TestExitCodes(t *testing.T) {
	real := errors.New("write the summary: input/output error")
	for _, tc := range []struct {
		name    string
		err     error
		sig     os.Signal
		code    int
		printed string
	}{
		{"ok", nil, nil, 0, ""},
		{"failure", errors.New("boom"), nil, exitFailure, "latscope: boom"},
		{"slo", &exitError{code: exitSLOMissed, err: errors.New("1 of 1 objectives missed")}, nil, exitSLOMissed, "objectives missed"},
		{"signal, nothing returned", nil, syscall.SIGTERM, exitInterrupted, "latscope: interrupted (SIGTERM)"},
		{"signal, context canceled", fmt.Errorf("agent x: %w", context.Canceled), syscall.SIGINT, exitInterrupted, "latscope: interrupted (SIGINT)"},
		{"signal, summary so far", &exitError{code: exitInterrupted, err: errors.New("interrupted: the summary covers the requests sent until then")}, syscall.SIGHUP, exitInterrupted, "the summary covers the requests sent until then (SIGHUP)"},
		{"signal, during set-up", fmt.Errorf("%w (while calibrating the prompts)", session.ErrSetupInterrupted), syscall.SIGTERM, exitInterrupted, "while calibrating the prompts) (SIGTERM)"},
		{"signal, and a real failure", errors.Join(context.Canceled, real), syscall.SIGHUP, exitInterrupted, "input/output error\nlatscope: interrupted (SIGHUP)"},
		{"signal wins over a missed SLO", &exitError{code: exitSLOMissed, err: errors.New("missed")}, syscall.SIGTERM, exitInterrupted, "interrupted (SIGTERM)"},
	} {
		var b strings.Builder
		if code := exitCode(&b, tc.err, tc.sig); code != tc.code || !strings.Contains(b.String(), tc.printed) {
			t.Errorf("%s: exit %d, printed %q; want %d and %q", tc.name, code, b.String(), tc.code, tc.printed)
		}
	}
}
