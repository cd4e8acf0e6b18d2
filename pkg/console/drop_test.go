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

package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tcpGuest stands for a backend's console endpoint in this test of the
// server alone: a TCP listener answering each line with the line in
// capitals. The backend stream is a real TCP connection to it, which the
// test drops from the guest's side: closed (the peer reads EOF) or reset
// (the peer's read fails).
type tcpGuest struct {
	ln    net.Listener
	conns chan *net.TCPConn
	wg    sync.WaitGroup
}

func startTCPGuest(t *testing.T) *tcpGuest {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &tcpGuest{ln: ln, conns: make(chan *net.TCPConn, 8)}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.conns <- c.(*net.TCPConn)
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := fmt.Fprintln(c, strings.ToUpper(sc.Text())); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for {
			select {
			case c := <-g.conns:
				_ = c.Close()
				continue
			default:
			}
			break
		}
		g.wg.Wait()
	})
	return g
}

// countingStream is the backend stream, counting the streams closed
// (the server may call Close more than once; it is idempotent).
type countingStream struct {
	net.Conn
	closes *atomic.Int32
	once   sync.Once
}

func (s *countingStream) Close() error {
	s.once.Do(func() { s.closes.Add(1) })
	return s.Conn.Close()
}

// TestConsoleBackendDropEndsSession: a session whose backend stream ends under it
// (its connection closed, or reset, from the backend's side) ends: the
// client is told the console stream ended (with the read's error when
// there is one), the backend stream is closed, the console's slot is
// free (a new attach without takeover is served) and
// banlieue_console_sessions is back to what it was; no goroutine is left.
func TestConsoleBackendDropEndsSession(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFixture(t)
	guest := startTCPGuest(t)
	var closes atomic.Int32
	f.srv.Open = func(ctx context.Context, tg Target, _ bool) (io.ReadWriteCloser, error) {
		if tg.Name != "vm-1" {
			return nil, ErrNotServed
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", guest.ln.Addr().String())
		if err != nil {
			return nil, err
		}
		f.opened.Add(1)
		return &countingStream{Conn: c, closes: &closes}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gauge := testutil.ToFloat64(sessionsOpen)

	for i, drop := range []struct {
		name string
		cut  func(*net.TCPConn) error
		want string
	}{
		{"closed", (*net.TCPConn).Close, "console stream ended"},
		// Linger 0: the close resets the connection.
		{"reset", func(c *net.TCPConn) error { _ = c.SetLinger(0); return c.Close() }, "connection reset by peer"},
	} {
		inR, inW := io.Pipe()
		out := &syncBuffer{}
		done := f.attach(ctx, t, "apiserver-token", "vm-1", "", inR, out)
		eventually(t, drop.name+": a session", func() bool { return f.srv.Sessions() == 1 && f.opened.Load() == int32(i+1) })
		if _, err := io.WriteString(inW, "hello "+drop.name+"\n"); err != nil {
			t.Fatal(err)
		}
		eventually(t, drop.name+": the guest's answer", func() bool { return strings.Contains(out.String(), "HELLO "+strings.ToUpper(drop.name)) })
		if got := testutil.ToFloat64(sessionsOpen); got != gauge+1 {
			t.Errorf("%s: banlieue_console_sessions %v with a session open, want %v", drop.name, got, gauge+1)
		}

		backend := <-guest.conns
		if err := drop.cut(backend); err != nil {
			t.Fatal(err)
		}
		err := waitErr(t, done)
		t.Logf("%s: the client's session ended: %v", drop.name, err)
		if err == nil || !strings.Contains(err.Error(), "console stream ended") || !strings.Contains(err.Error(), drop.want) {
			t.Errorf("%s: the client's session ended with %v, want the console stream ended (%q)", drop.name, err, drop.want)
		}
		_ = inW.Close()
		eventually(t, drop.name+": the slot freed and the stream closed", func() bool {
			return f.srv.Sessions() == 0 && closes.Load() == int32(i+1)
		})
		eventually(t, drop.name+": banlieue_console_sessions back", func() bool { return testutil.ToFloat64(sessionsOpen) == gauge })
	}
	if n := closes.Load(); n != 2 {
		t.Errorf("%d backend streams closed, want both", n)
	}

	// The console is free: an attach without takeover is served, and
	// its client going ends it too.
	cctx, ccancel := context.WithCancel(ctx)
	inR, inW := io.Pipe()
	out := &syncBuffer{}
	last := f.attach(cctx, t, "apiserver-token", "vm-1", "", inR, out)
	eventually(t, "a session after the drops", func() bool { return f.srv.Sessions() == 1 && f.opened.Load() == 3 })
	if _, err := io.WriteString(inW, "again\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the answer after the drops", func() bool { return strings.Contains(out.String(), "AGAIN") })
	ccancel()
	_ = inW.Close()
	_ = waitErr(t, last)
	eventually(t, "the last session released", func() bool {
		return f.srv.Sessions() == 0 && closes.Load() == 3 && testutil.ToFloat64(sessionsOpen) == gauge
	})

	cancel()
	f.srv.Close()
	f.http.Close() // its connections' goroutines outlive sessions by design
	_ = guest.ln.Close()
	guest.wg.Wait()
	// The last to go is client-go's websocket heartbeat, at its next
	// beat (5 s).
	eventually(t, fmt.Sprintf("goroutines back to %d", before), func() bool { return runtime.NumGoroutine() <= before })
}
