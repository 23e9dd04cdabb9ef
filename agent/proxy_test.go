package agent

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy is a TCP proxy in front of an agent that cuts its first
// connection after a given number of bytes from the agent (mid-event), and
// then refuses connections until up is called: a network outage of a
// length the test controls.
type cutProxy struct {
	ln     net.Listener
	target string
	cut    chan struct{} // closed when the first connection has been cut

	mu       sync.Mutex
	cutAfter int64 // bytes the first connection forwards before the cut; 0 once cut
	down     bool
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func newCutProxy(t testing.TB, target string, cutAfter int64) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, cut: make(chan struct{}), cutAfter: cutAfter, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) url() string { return "http://" + p.ln.Addr().String() }

// cutNow cuts every connection and starts an outage.
func (p *cutProxy) cutNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// retarget sends later connections to another agent.
func (p *cutProxy) retarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// up ends the outage.
func (p *cutProxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *cutProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		limit := p.cutAfter
		if p.down {
			p.mu.Unlock()
			client.Close() // the outage: the connection is refused at once
			continue
		}
		p.cutAfter = 0 // only the first connection is cut
		p.conns[client] = struct{}{}
		target := p.target
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(client, target, limit) })
	}
}

// serve forwards one connection; with limit > 0 it forwards exactly limit
// bytes from the agent, then cuts both sides and starts the outage.
func (p *cutProxy) serve(client net.Conn, target string, limit int64) {
	defer client.Close()
	agent, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer agent.Close()
	p.mu.Lock()
	p.conns[agent] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		delete(p.conns, agent)
		p.mu.Unlock()
	}()
	p.wg.Go(func() {
		_, _ = io.Copy(agent, client)
		agent.Close() // the client left: end the other direction too
	})
	if limit <= 0 {
		_, _ = io.Copy(client, agent)
		return
	}
	_, err = io.CopyN(client, agent, limit)
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	if err == nil { // else the agent closed first: the test sees no cut
		close(p.cut)
	}
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
