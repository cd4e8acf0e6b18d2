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

package libvirtd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/loopback"
)

// TestForwarderReachesIntoNamespace: connections accepted on the host's
// loopback reach a server on 127.0.0.1 inside another network namespace,
// not the server listening at the same address on the host; bytes
// round-trip intact both ways on several connections at once, and a
// client's end of input reaches the server as its end of input. close
// stops the listener, ends a connection in flight and leaves no goroutine
// behind.
func TestForwarderReachesIntoNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces)")
	}
	ns := netnsOfProcess(t)
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// A forwarder dialing on the host would reach this one.
	serve(t, listenOn(t, nil, target), "host:")
	serve(t, listenOn(t, ns, target), "ns:")

	goroutines := runtime.NumGoroutine()
	fport, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	fns, err := os.Open(ns.Name())
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	f, err := forward(net.JoinHostPort("127.0.0.1", strconv.Itoa(fport)), fns, target, &log)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			f.close()
		}
	}()
	addr := f.ln.Addr().String()

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := roundTrip(addr, 256<<10); err != nil {
				t.Errorf("connection %d: %v", i, err)
			}
		}()
	}
	wg.Wait()

	// A connection in flight when the forwarder closes ends.
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	if _, err := held.Write([]byte("unfinished")); err != nil {
		t.Fatal(err)
	}
	waitConns(t, f, 2) // held and its way in are both open
	closeWithin(t, f, 30*time.Second)
	closed = true
	_ = held.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := held.Read(make([]byte, 64)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("a connection in flight after close: read %d bytes, %v; want it ended", n, err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Errorf("%s still accepts after close", addr)
	}
	if log.String() != "" {
		t.Errorf("the forwarder logged failures:\n%s", log.String())
	}
	_ = held.Close()
	// Only the forwarder's goroutines count: the servers' per-connection
	// ones end with the connections.
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return runtime.NumGoroutine() <= goroutines, nil
	}); err != nil {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after close, %d before the forwarder:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
	}
}

// netnsOfProcess starts a process in a new network namespace with its
// loopback up, for the test's duration, and returns that namespace open.
func netnsOfProcess(t *testing.T) *os.File {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec sleep 600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("namespace holder: %q, %v", line, err)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}

// listenOn listens on addr in the network namespace ns, or this
// process's when ns is nil.
func listenOn(t *testing.T, ns *os.File, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	listen := func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}
	var err error
	if ns == nil {
		err = listen()
	} else {
		err = inNetns(ns, listen)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// serve answers each connection of l, once its client has sent all it
// will (its end of input), with prefix and what it read.
func serve(t *testing.T, l net.Listener, prefix string) {
	t.Helper()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				b, err := io.ReadAll(c)
				if err == nil {
					_, _ = c.Write(append([]byte(prefix), b...))
				}
			}()
		}
	}()
}

// roundTrip sends n random bytes through addr, ends its input, and checks
// that the namespace's server answered them back intact.
func roundTrip(addr string, n int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	sent := make([]byte, n)
	_, _ = rand.Read(sent)
	go func() {
		_, _ = c.Write(sent)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if prefix, rest, _ := bytes.Cut(got, []byte(":")); string(prefix) != "ns" || !bytes.Equal(rest, sent) {
		return fmt.Errorf("answered by %q with %d bytes (%v equal), want ns and the %d bytes sent", prefix, len(rest), bytes.Equal(rest, sent), n)
	}
	return nil
}

// waitConns waits until f carries n connections.
func waitConns(t *testing.T, f *forwarder, n int) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.conns) == n, nil
	}); err != nil {
		t.Fatalf("the forwarder does not carry %d connections", n)
	}
}

// closeWithin closes f, failing the test when that takes longer than
// timeout (a connection close did not end).
func closeWithin(t *testing.T, f *forwarder, timeout time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { f.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		buf := make([]byte, 1<<20)
		t.Fatalf("close did not return within %s:\n%s", timeout, buf[:runtime.Stack(buf, true)])
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// syncBuffer is a bytes.Buffer safe for the forwarder's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
