package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// runningAgent is `latscope agent` run in-process on a port the kernel
// picked: its address is read from the line the agent prints when it
// listens, so no other server can take the port first.
type runningAgent struct {
	addr string
	// ssh receives the address of the dashboard over SSH, when --ssh is
	// given and the agent says where it serves it.
	ssh    chan string
	stop   context.CancelFunc
	done   chan struct{}
	stdout string
	stderr strings.Builder
	err    error
}

func startAgent(t *testing.T, args ...string) *runningAgent {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	a := &runningAgent{stop: stop, done: make(chan struct{}), ssh: make(chan string, 1)}
	pr, pw := io.Pipe()
	var stdout bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"agent", "--listen", "127.0.0.1:0"}, args...))
	root.SetOut(&stdout)
	root.SetErr(pw)
	scanned := make(chan struct{})
	go func() {
		defer close(a.done)
		a.err = root.ExecuteContext(ctx)
		a.stdout = stdout.String()
		pw.Close()
		<-scanned // a.stderr is complete
	}()
	addr := make(chan string, 1)
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			a.stderr.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(line, "latscope agent: serving http://"); ok {
				host, _, _ := strings.Cut(rest, "/")
				addr <- host
			}
			if rest, ok := strings.CutPrefix(line, "latscope agent: dashboard over ssh on "); ok {
				host, _, _ := strings.Cut(rest, ": ")
				a.ssh <- host
			}
		}
		close(addr)
	}()
	select {
	case a.addr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not say where it listens")
	}
	if a.addr == "" {
		<-a.done
		t.Fatalf("agent: %v\n%s", a.err, a.stderr.String())
	}
	// Read stderr again only after done: the scanner writes it until then.
	t.Cleanup(func() { stop(); <-a.done })
	return a
}

// wait stops the agent (Ctrl-C ends its linger) and waits for it.
func (a *runningAgent) wait() {
	a.stop()
	<-a.done
}

func TestAgentAndAttach(t *testing.T) {
	url := serveTinySim(t)
	agent := startAgent(t, "--url", url, "-n", "40", "-c", "4",
		"--prompt-tokens", "32", "--output-tokens", "8", "--no-gpu", "--linger", "30s", "--quiet")
	// attach ends when the agent's session ends.
	out, stderr, err := execute(t, "attach", "http://"+agent.addr, "--no-tui")
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	agent.wait() // it lingers for late dashboards; Ctrl-C ends that
	if agent.err != nil {
		t.Fatalf("agent: %v\n%s", agent.err, agent.stderr.String())
	}
	want := "Requests: 40 sent, 40 ok"
	if !strings.Contains(agent.stdout, want) || !strings.Contains(out, want) {
		t.Errorf("agent and attach disagree or miss requests.\nagent:\n%s\nattach:\n%s", agent.stdout, out)
	}
}

func TestAgentRefusesAnExposedAddressWithoutAToken(t *testing.T) {
	t.Setenv("LATSCOPE_TOKEN", "")
	_, _, err := execute(t, "agent", "--url", "http://127.0.0.1:1", "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "--token") {
		t.Fatalf("err = %v, want a refusal that names --token", err)
	}
}

// A shard of a fleet's load needs the fleet's seed (else the shards would
// draw different schedules), and a readable --shard and --start-at; each is
// refused before anything is sent or served.
func TestAgentRefusesAShardItCannotSend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "1/3"}, "same --seed"},
		{[]string{"--shard", "3/3", "--seed", "7"}, "want 0 <= i < N"},
		{[]string{"--shard", "one", "--seed", "7"}, "want i/N"},
		{[]string{"--shard", "0/3", "--seed", "7", "--start-at", "soon"}, "--start-at"},
	} {
		args := append([]string{"agent", "--url", "http://127.0.0.1:1"}, c.args...)
		_, _, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
