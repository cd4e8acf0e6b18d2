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

// Package blackhole is a backend host that hangs, for tests: a real TCP
// listener on 127.0.0.1 that accepts every connection, reads nothing and
// never answers (a vCenter, libvirtd or Proxmox VE host wedged after
// accept). Nothing short of a deadline gets a client past it.
package blackhole

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Listener is one black hole.
type Listener struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
}

// Start listens on 127.0.0.1; the test's end closes it and every
// connection it holds.
func Start(t testing.TB) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listener{ln: ln}
	go l.serve()
	t.Cleanup(l.close)
	return l
}

// Addr is HOST:PORT.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Accepted counts the connections taken so far.
func (l *Listener) Accepted() int64 { return l.accepted.Load() }

// WaitAccepted waits until n connections were taken, at most timeout.
func (l *Listener) WaitAccepted(n int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for l.Accepted() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func (l *Listener) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		// Held open, never read or written: the peer's handshake or
		// request waits for an answer that does not come.
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
		l.accepted.Add(1)
	}
}

func (l *Listener) close() {
	_ = l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

// Outcome is how a call ended and how long it took.
type Outcome struct {
	Err  error
	Took time.Duration
}

// Hang runs call, which must dial l and hang there, in the background,
// and returns once l has accepted its connection: the channel gets its
// outcome, started is when it began. The test fails if the call never
// reaches l.
func (l *Listener) Hang(t testing.TB, call func() error) (outcome <-chan Outcome, started time.Time) {
	t.Helper()
	out := make(chan Outcome, 1)
	started = time.Now()
	before := l.Accepted()
	go func() {
		err := call()
		out <- Outcome{err, time.Since(started)}
	}()
	if !l.WaitAccepted(before+1, 5*time.Second) {
		t.Fatal("the call never reached the black hole")
	}
	return out, started
}

// WaitedAbout fails t unless o ended with want (errors.Is) after about d:
// the caller of a hung login gives up after its own wait, not the
// login's deadline.
func WaitedAbout(t testing.TB, o Outcome, want error, d time.Duration) {
	t.Helper()
	if !errors.Is(o.Err, want) {
		t.Errorf("caller of the hung login: %v, want %v", o.Err, want)
	}
	if o.Took < d-100*time.Millisecond || o.Took > d+time.Second {
		t.Errorf("caller of the hung login waited %v, want about %v", o.Took, d)
	}
}
