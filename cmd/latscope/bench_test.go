package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBenchFlagsParse(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"accuracy", "throughput"} {
		cmd := newBenchCmd()
		c, _, err := cmd.Find([]string{sub})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ParseFlags([]string{"--concurrency", "2,8", "--output-tokens", "9", "--json"}); err != nil {
			t.Errorf("%s: %v", sub, err)
		}
		if got, _ := c.Flags().GetIntSlice("concurrency"); len(got) != 2 || got[0] != 2 || got[1] != 8 {
			t.Errorf("%s: concurrency = %v, want [2 8]", sub, got)
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"accuracy", "--concurrency", "x"}, `invalid argument "x" for "--concurrency"`},
		{[]string{"accuracy", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"accuracy", "--output-tokens", "1"}, "output tokens"},
		{[]string{"accuracy", "--concurrency", "0"}, "concurrency must be between 1 and 4096"},
		{[]string{"accuracy", "--profile", "nope", "--concurrency", "1"}, `unknown profile "nope"`},
		{[]string{"throughput", "--rounds", "0"}, "rounds must be between 1 and 1000"},
		{[]string{"throughput", "--tokens-per-write", "0"}, "tokens per write"},
		{[]string{"throughput", "extra"}, `unknown command "extra"`},
		{[]string{"scale", "--streams", "0"}, "streams must be between 1 and 100000"},
		{[]string{"scale", "--streams", "x"}, `invalid argument "x" for "--streams"`},
		{[]string{"scale", "--interval", "0s"}, "token interval must be between"},
		{[]string{"scale", "--output-tokens", "1"}, "output tokens must be between 2"},
		{[]string{"scale", "--duration", "0s"}, "duration must be between"},
		{[]string{"scale", "--rounds", "-1"}, "rounds must be between 1 and 100"},
		{[]string{"scale-case", "--client", "x"}, `--client "x": want probe or bare`},
		{[]string{"scale-case", "--client", "bare"}, "--url and --log are required"},
	}
	for _, tt := range tests {
		cmd := newBenchCmd()
		cmd.SetArgs(tt.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestBenchAccuracySmoke runs the real accuracy bench (probe, bare client,
// in-process simulator) at a tiny size.
func TestBenchAccuracySmoke(t *testing.T) {
	t.Parallel()
	cmd := newBenchCmd()
	// As under the root command: a missed target is the error, not a usage
	// text on stdout after the JSON.
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"accuracy", "--profile", "tiny", "--concurrency", "1,4", "--requests", "2",
		"--output-tokens", "4", "--prompt-tokens", "8", "--json"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	// Two requests are too few to judge the target: a miss (exit 1) is
	// fine, any other error is not.
	if err := cmd.ExecuteContext(ctx); err != nil && !strings.Contains(err.Error(), "a target was missed") {
		t.Fatal(err)
	}
	var res struct {
		Levels []struct {
			Clients []struct {
				Client   string
				Requests int
				Failed   int
				TTFT     struct{ N int } `json:"ttft_abs_error"`
			}
		}
		Target struct{ Text string }
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(res.Levels) != 2 || !strings.Contains(res.Target.Text, "1.2x") {
		t.Fatalf("unexpected result:\n%s", out.String())
	}
	for _, lv := range res.Levels {
		for _, c := range lv.Clients {
			if c.Requests != 2 || c.Failed != 0 || c.TTFT.N != 2 {
				t.Errorf("%s: %+v, want 2 requests scored, none failed\n%s", c.Client, c, out.String())
			}
		}
	}
}

// TestBenchServeChild runs the hidden child command as the throughput bench
// does: it prints its URL, serves, and exits when stdin closes.
func TestBenchServeChild(t *testing.T) {
	t.Parallel()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	cmd := newBenchCmd()
	cmd.SetIn(stdinR)
	cmd.SetOut(stdoutW)
	cmd.SetArgs([]string{"serve", "--tokens-per-write", "4"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(context.Background()) }()

	url, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stdoutR)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`
	resp, err := http.Post(strings.TrimSpace(url)+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(b), `"delta":{"content":"`); n != 5 {
		t.Errorf("%d content events, want 5:\n%s", n, b)
	}
	stdinW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after stdin closed")
	}
	stdoutW.Close()
}

func TestServeArgs(t *testing.T) {
	t.Parallel()
	cmd := newBenchCmd()
	tp, _, err := cmd.Find([]string{"throughput"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(serveArgs(tp), " ")
	if got != "serve --listen 127.0.0.1:0" {
		// newBenchCmd is the root here; under latscope it is "bench serve ...".
		t.Errorf("serveArgs = %q", got)
	}
}
