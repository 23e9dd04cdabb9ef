//go:build acceptance

package sim

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Through the proxy hop, every stream on a kept-alive connection ends with
// [DONE]. The proxy once streamed the request body through, and the
// upstream transport's last read of it, after the answer had begun, failed
// now and then: it dropped the upstream connection and the client got a
// 200 with no body (about 3 of 2,400 streams here).
func TestEveryStreamThroughTheProxyEnds(t *testing.T) {
	prof, err := ProfileByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Profile: prof, ServerTiming: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = Deployment{Network: Network{RTT: DefaultRTT}}.Serve(ctx, srv, ln); close(served) }()
	defer func() { cancel(); <-served; _ = srv.Close() }()

	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	const workers, each = 8, 300
	var cut, total atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			for range each {
				body := `{"model":"sim-7b","stream":true,"max_tokens":16,"messages":[{"role":"user","content":"hello there"}]}`
				resp, err := c.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("post: %v", err)
					return
				}
				done := false
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					done = done || strings.Contains(sc.Text(), "[DONE]")
				}
				resp.Body.Close()
				total.Add(1)
				if !done {
					cut.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if cut.Load() > 0 {
		t.Errorf("%d of %d streams through the proxy ended without [DONE]", cut.Load(), total.Load())
	}
}
