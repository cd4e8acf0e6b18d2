/*
Copyright The banlieue Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

	http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package proxytest is a connection proxy for tests only (as
// net/http/httptest is a server for tests): it forwards each connection
// accepted on a listener to a new upstream connection, byte for byte in
// both directions, and can cut one of them, both its ends closed, as a
// connection that breaks on the way. Tests put it between a client and
// its backend (a unix socket, a TCP port; TLS passes through) to see what
// the client does when its connection drops.
package proxytest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards the connections of a listener; see Start.
type Proxy struct {
	ln     net.Listener
	dial   func() (net.Conn, error)
	mu     sync.Mutex
	pairs  [][2]net.Conn
	live   int
	closed bool
	wg     sync.WaitGroup
}

// Start proxies every connection accepted on ln to one dial returns (a
// connection dial fails for is closed), until Close, which t's cleanup
// calls. Connections are numbered from 0 in the order they were accepted
// (and dialled upstream).
func Start(t testing.TB, ln net.Listener, dial func() (net.Conn, error)) *Proxy {
	t.Helper()
	p := &Proxy{ln: ln, dial: dial}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := p.dial()
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.pairs = append(p.pairs, [2]net.Conn{in, out})
		p.live++
		p.wg.Add(2)
		p.mu.Unlock()
		// The direction that ends second counts the connection gone.
		var copying atomic.Int32
		copying.Store(2)
		for _, dir := range [][2]net.Conn{{in, out}, {out, in}} {
			go func() {
				defer p.wg.Done()
				_, _ = io.Copy(dir[0], dir[1])
				_ = dir[0].Close()
				_ = dir[1].Close()
				if copying.Add(-1) == 0 {
					p.mu.Lock()
					p.live--
					p.mu.Unlock()
				}
			}()
		}
	}
}

// Accepted is how many connections the proxy accepted (and connected
// upstream).
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Live is how many connections are being proxied: accepted, and not yet
// ended in both directions.
func (p *Proxy) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// Cut closes the i-th connection accepted (from 0), both ends: the
// client's and the upstream one.
func (p *Proxy) Cut(i int) {
	p.mu.Lock()
	pair := p.pairs[i]
	p.mu.Unlock()
	_ = pair[0].Close()
	_ = pair[1].Close()
}

// Close closes the listener and every connection, and waits for the
// proxy's goroutines to end. It may be called more than once.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, pair := range p.pairs {
		_ = pair[0].Close()
		_ = pair[1].Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
