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

package proxytest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestCut: two connections through the proxy to a loopback echo server
// both echo; cutting the first ends its reads, and the second still
// echoes; Live counts it alone then, Accepted both.
func TestCut(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var served sync.WaitGroup
	t.Cleanup(func() { _ = echo.Close(); served.Wait() })
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go func() {
				defer served.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := Start(t, ln, func() (net.Conn, error) { return net.Dial("tcp", echo.Addr().String()) })

	var conns []net.Conn
	for i := range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		echoes(t, c, "hello")
		if n := p.Accepted(); n != i+1 {
			t.Fatalf("Accepted %d after %d connections, want %d", n, i+1, i+1)
		}
		conns = append(conns, c)
	}
	if n := p.Live(); n != 2 {
		t.Fatalf("Live %d with two connections open, want 2", n)
	}

	p.Cut(0)
	_ = conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conns[0].Read(make([]byte, 8)); err == nil || isTimeout(err) {
		t.Fatalf("a read on the cut connection: %d bytes, %v; want it ended", n, err)
	}
	echoes(t, conns[1], "still here")
	deadline := time.Now().Add(5 * time.Second)
	for p.Live() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Live %d 5 s after the cut, want 1", p.Live())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := p.Accepted(); n != 2 {
		t.Errorf("Accepted %d after the cut, want 2", n)
	}

	p.Close()
	_ = conns[1].SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conns[1].Read(make([]byte, 8)); err == nil || isTimeout(err) {
		t.Fatalf("a read after Close: %d bytes, %v; want it ended", n, err)
	}
}

// echoes writes msg on c and reads it back within 5 s.
func echoes(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
	_ = c.SetReadDeadline(time.Time{})
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
