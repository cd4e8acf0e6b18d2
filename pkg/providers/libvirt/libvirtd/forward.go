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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// forwarder carries each connection accepted on a listener of this
// process's network namespace to an address inside another network
// namespace: the way in to a daemon whose namespace nothing routes to.
type forwarder struct {
	ln     net.Listener
	netns  *os.File // the target namespace, held open while forwarding
	target string
	log    io.Writer

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// forward listens on listen (host:port, in this process's namespace) and
// forwards every connection to target (host:port) inside the network
// namespace netns; it owns netns and closes it on close. Failures to reach
// target are written to log.
func forward(listen string, netns *os.File, target string, log io.Writer) (*forwarder, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("forwarder listening on %s: %w", listen, err)
	}
	f := &forwarder{ln: ln, netns: netns, target: target, log: log, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// serve accepts until the listener closes.
func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			return
		}
		f.wg.Add(1)
		go f.carry(c)
	}
}

// track records c so close ends it; false (and c closed) once closing.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
	_ = c.Close()
}

// carry dials target inside the namespace for the accepted c and copies
// both ways; each side's end of input is passed on as a half-close, and
// both connections close when both directions are done.
func (f *forwarder) carry(c net.Conn) {
	defer f.wg.Done()
	defer f.untrack(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := dialIn(ctx, f.netns, f.target)
	if err != nil {
		_, _ = fmt.Fprintf(f.log, "libvirtd forwarder: %s to %s: %v\n", c.RemoteAddr(), f.target, err)
		return
	}
	if !f.track(in) {
		return
	}
	defer f.untrack(in)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(in, c)
	}()
	pipe(c, in)
	<-done
}

// pipe copies src to dst until src ends, then closes dst for writing
// (the peer reads the end), or entirely when it cannot half-close.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	_ = dst.Close()
}

// close stops accepting, ends every forwarded connection and waits for
// the forwarder's goroutines, then lets the namespace go.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	_ = f.ln.Close()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	_ = f.netns.Close()
}

// dialIn dials addr (tcp) from inside the network namespace netns: a
// socket stays in the namespace it was created in, so only the dial runs
// on a thread moved there.
func dialIn(ctx context.Context, netns *os.File, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(netns, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil && c != nil {
		_ = c.Close()
		return nil, err
	}
	return c, err
}

// inNetns runs fn on an OS thread moved into the network namespace netns,
// and moves the thread back. Sockets fn creates belong to netns for their
// lifetime. A thread that cannot be moved back stays locked, so the
// runtime ends it with the goroutine instead of running others there.
func inNetns(netns *os.File, fn func() error) error {
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening this thread's network namespace: %w", err)
	}
	defer func() { _ = own.Close() }()
	if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering network namespace %s: %w", netns.Name(), err)
	}
	fnErr := fn()
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(fnErr, fmt.Errorf("returning to this thread's network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}
