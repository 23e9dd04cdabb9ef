package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// PlainClientConfig configures RunPlainClient.
type PlainClientConfig struct {
	URL          string // the server's base URL
	Model        string
	OutputTokens int
	// Rate, when positive, sends that many requests per second on a fixed
	// schedule, each in its own goroutine; 0 streams one request after the
	// other.
	Rate     float64
	Duration time.Duration
}

// RunPlainClient is the idle bench's floor: what any Go program streaming
// a chat completion does and no more, http.Post and a bufio.Scanner over
// the body, counting the data lines. It runs until cfg.Duration or ctx
// ends and returns the token events it read.
func RunPlainClient(ctx context.Context, cfg PlainClientConfig) (int64, error) {
	if cfg.Duration <= 0 || cfg.Rate < 0 || cfg.OutputTokens < 1 {
		return 0, fmt.Errorf("plain client: duration %s, rate %v, output tokens %d", cfg.Duration, cfg.Rate, cfg.OutputTokens)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	url := strings.TrimSuffix(cfg.URL, "/") + "/v1/chat/completions"
	body := `{"model":` + strconv.Quote(cfg.Model) + `,"stream":true,"max_tokens":` + strconv.Itoa(cfg.OutputTokens) +
		`,"messages":[{"role":"user","content":"Say something."}]}`
	if cfg.Rate == 0 {
		var n int64
		for ctx.Err() == nil {
			k, err := plainStream(ctx, url, body)
			n += k
			if err != nil && ctx.Err() == nil {
				return n, err
			}
		}
		return n, nil
	}
	return plainOpenLoop(ctx, url, body, time.Duration(float64(time.Second)/cfg.Rate))
}

// plainOpenLoop sends a request every period until ctx ends.
func plainOpenLoop(ctx context.Context, url, body string, period time.Duration) (int64, error) {
	type result struct {
		n   int64
		err error
	}
	results := make(chan result)
	running, total := 0, int64(0)
	var first error
	tick := time.NewTicker(period)
	defer tick.Stop()
	send := func() {
		running++
		go func() {
			n, err := plainStream(ctx, url, body)
			results <- result{n, err}
		}()
	}
	send()
	for {
		select {
		case <-tick.C:
			if ctx.Err() == nil {
				send()
			}
		case r := <-results:
			running--
			total += r.n
			if r.err != nil && ctx.Err() == nil && first == nil {
				first = r.err
			}
		case <-ctx.Done():
			for ; running > 0; running-- {
				total += (<-results).n
			}
			return total, first
		}
	}
}

// plainStream streams one completion and counts its data lines.
func plainStream(ctx context.Context, url, body string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return 0, fmt.Errorf("status %s", resp.Status)
	}
	var n int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte("data: ")) && !bytes.Equal(line, []byte("data: [DONE]")) {
			n++
		}
	}
	return n, sc.Err()
}
