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
package loopback

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer plays a Service in front of replicas listening on loopback, as
// kube-proxy would: each connection goes to the next replica that accepts
// it, so a dead replica is skipped. kube-apiserver cannot route an
// APIService to several loopback endpoints itself (Endpoints may not hold
// 127.0.0.1).
type Balancer struct {
	l        net.Listener
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

// NewBalancer listens on addr and forwards each connection to one of
// backends (host:port), round robin, skipping those that refuse it.
func NewBalancer(addr string, backends []string) (*Balancer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &Balancer{l: l, backends: backends, conns: map[net.Conn]bool{}}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

func (b *Balancer) serve() {
	defer b.wg.Done()
	for {
		in, err := b.l.Accept()
		if err != nil {
			return // closed
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.forward(in)
		}()
	}
}

func (b *Balancer) track(c net.Conn, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.conns[c] = true
	} else {
		delete(b.conns, c)
	}
}

func (b *Balancer) forward(in net.Conn) {
	defer in.Close()
	start := int(b.next.Add(1))
	var out net.Conn
	for i := range b.backends {
		c, err := net.DialTimeout("tcp", b.backends[(start+i)%len(b.backends)], time.Second)
		if err == nil {
			out = c
			break
		}
	}
	if out == nil {
		return // no replica up: the client sees the connection close
	}
	defer out.Close()
	b.track(in, true)
	b.track(out, true)
	defer b.track(in, false)
	defer b.track(out, false)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done // either side ending ends the pair
}

// Close stops listening, closes the connections in flight and waits for
// their forwarding to end.
func (b *Balancer) Close() {
	b.l.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
