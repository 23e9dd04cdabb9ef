package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
)

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestAgentAndAttach(t *testing.T) {
	url := serveTinySim(t)
	addr := freeAddr(t)
	var wg sync.WaitGroup
	var agentOut, agentErr string
	var agentRunErr error
	ctx, stopAgent := context.WithCancel(context.Background())
	defer stopAgent()
	wg.Go(func() {
		agentOut, agentErr, agentRunErr = executeCtx(t, ctx, "agent", "--url", url, "--listen", addr, "-n", "40", "-c", "4",
			"--prompt-tokens", "32", "--output-tokens", "8", "--no-gpu", "--linger", "30s", "--quiet")
	})
	// attach retries until the agent listens, and ends when the agent's
	// session ends.
	out, stderr, err := execute(t, "attach", "http://"+addr, "--no-tui")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	stopAgent() // it lingers for late dashboards; Ctrl-C ends that
	wg.Wait()
	if agentRunErr != nil {
		t.Fatalf("agent: %v\n%s", agentRunErr, agentErr)
	}
	want := "Requests: 40 sent, 40 ok"
	if !strings.Contains(agentOut, want) || !strings.Contains(out, want) {
		t.Errorf("agent and attach disagree or miss requests.\nagent:\n%s\nattach:\n%s", agentOut, out)
	}
}

func TestAgentRefusesAnExposedAddressWithoutAToken(t *testing.T) {
	t.Setenv("LATSCOPE_TOKEN", "")
	_, _, err := execute(t, "agent", "--url", "http://127.0.0.1:1", "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "--token") {
		t.Fatalf("err = %v, want a refusal that names --token", err)
	}
}
