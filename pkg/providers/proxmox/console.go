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

package proxmox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/firestoned/banlieue/pkg/providers"
)

// The console is PVE's xterm.js path (docs/design/console.md, pvesim's
// console.go for the sources read): POST termproxy for a VNC ticket and a
// port, GET vncwebsocket upgraded, "USER:TICKET\n" answered "OK", then
// "0:LEN:DATA" frames of input, "1:COLS:ROWS:" resizes and "2" pings one
// way, the terminal's raw bytes the other.
//
// It logs in as the Secret's console user, never with the API token:
// PVE before qemu-server 9.1.7 refuses a token's ticket at the handshake,
// and go-proxmox v0.9.0's VNCWebSocket refuses to dial with a token
// whatever the release. Each session logs in on its own client and
// connections, so closing it leaves nothing open.
//
// Busy and takeover: PVE reports neither. A VM's serial socket (QEMU's
// chardev) serves one terminal at a time and lets the next wait, attached
// but silent, until the first leaves; PVE has no call that detaches
// another terminal. So OpenConsole never returns ErrConsoleBusy and force
// changes nothing: a session opened while someone else's (the PVE web UI's)
// holds the port hears the guest once that one ends. Sessions opened
// through banlieue are made exclusive by the console endpoint above this.

const (
	// consoleAttachTimeout bounds the attach when ctx has no deadline.
	consoleAttachTimeout = 30 * time.Second
	// consolePing is how often the session pings, as the web UI does:
	// termproxy ignores pings; they keep the websocket from looking idle
	// to pveproxy and proxies between (after how long an idle one is
	// closed is not verified).
	consolePing = 30 * time.Second
)

// OpenConsole attaches to serial0 of the VM spec names (found by its
// instance UUID as DeleteMachine finds it): ErrNoConsole when there is
// none, the VM is not running, it has no serial0 socket, or the Secret
// names no console user.
func (c *Client) OpenConsole(ctx context.Context, spec providers.MachineSpec, force bool) (io.ReadWriteCloser, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, consoleAttachTimeout)
		defer cancel()
	}
	vm, err := c.find(ctx, spec)
	if err != nil {
		return nil, err
	}
	switch {
	case vm == nil:
		return nil, fmt.Errorf("%w: there is no VM of %s", providers.ErrNoConsole, spec.Name)
	case vm.Status != proxmox.StatusVirtualMachineRunning:
		return nil, fmt.Errorf("%w: VM %d is %s", providers.ErrNoConsole, vm.VMID, vm.Status)
	case vm.VirtualMachineConfig == nil || vm.VirtualMachineConfig.Serials["serial0"] != "socket":
		// Made before VMs were given one, or changed by hand: converge
		// adds it while the VM is off (a running VM would keep it pending).
		return nil, fmt.Errorf("%w: VM %d has no serial port (serial0: socket); it gets one at its next power-off", providers.ErrNoConsole, vm.VMID)
	case c.console.Username == "":
		return nil, fmt.Errorf("%w: the Provider's credentials Secret has no consoleUsername and consolePassword: "+
			"Proxmox VE opens a console to a user's ticket, not to an API token; add a PVE user with VM.Console on the VMs", providers.ErrNoConsole)
	}
	hc := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
		TLSClientConfig: c.tlsConfig.Clone(), Proxy: http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: dialTimeout}).DialContext,
		TLSHandshakeTimeout: dialTimeout,
	}}
	api := proxmox.NewClient(c.endpoint, proxmox.WithHTTPClient(hc),
		proxmox.WithCredentials(&proxmox.Credentials{Username: c.console.Username, Password: c.console.Password}))
	st, err := attach(ctx, api.NodeRef(vm.Node).VirtualMachineRef(int(vm.VMID)))
	if err != nil {
		hc.CloseIdleConnections()
		return nil, fmt.Errorf("opening the console of VM %d as %s: %w", vm.VMID, c.console.Username, err)
	}
	st.hc = hc
	return st, nil
}

// attach runs termproxy and joins its websocket: the handshake is bounded
// by ctx (VNCWebSocket's dial by its own 30 s).
func attach(ctx context.Context, vm *proxmox.VirtualMachine) (*consoleStream, error) {
	// The first request logs in (go-proxmox answers the 401 with
	// POST /access/ticket) and needs VM.Console on /vms/VMID.
	term, err := vm.TermProxy(ctx)
	if err != nil {
		return nil, fmt.Errorf("termproxy: %w", err)
	}
	send, recv, errs, closer, err := vm.VNCWebSocket(&proxmox.VNC{Port: term.Port, Ticket: term.Ticket})
	if err != nil {
		return nil, fmt.Errorf("vncwebsocket: %w", err)
	}
	st := &consoleStream{send: send, recv: recv, closer: closer, closed: make(chan struct{}), broken: make(chan struct{})}
	fail := func(err error) (*consoleStream, error) {
		_ = closer()
		return nil, err
	}
	select {
	case send <- []byte(term.User + ":" + term.Ticket + "\n"):
	case err := <-errs:
		return fail(fmt.Errorf("console handshake: %w", err))
	case <-ctx.Done():
		return fail(fmt.Errorf("console handshake: %w", ctx.Err()))
	}
	select {
	case msg, ok := <-recv:
		// termproxy's "OK" may share its message with the first output.
		if !ok || !strings.HasPrefix(string(msg), "OK") {
			return fail(fmt.Errorf("console handshake: termproxy answered %q, not OK", msg))
		}
		st.buf = msg[2:]
	case err := <-errs:
		// termproxy closes without a word on a ticket it refuses.
		return fail(fmt.Errorf("console handshake refused (the ticket of %s): %w", term.User, err))
	case <-ctx.Done():
		return fail(fmt.Errorf("console handshake: %w", ctx.Err()))
	}
	st.wg.Add(2)
	go st.watch(errs)
	go st.ping()
	return st, nil
}

// consoleStream is go-proxmox's channels as an io.ReadWriteCloser.
type consoleStream struct {
	send   chan<- []byte
	recv   <-chan []byte
	closer func() error
	hc     *http.Client

	rmu sync.Mutex
	buf []byte
	wmu sync.Mutex

	// closed is closed by Close; broken when the connection failed (err).
	closed    chan struct{}
	broken    chan struct{}
	err       error
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// watch takes the connection's first error (the peer gone: the VM
// stopped, termproxy ended) and ends the stream with it.
func (s *consoleStream) watch(errs <-chan error) {
	defer s.wg.Done()
	if err, ok := <-errs; ok {
		s.err = err
		close(s.broken)
	}
	// errs is closed by the closer; nothing more comes.
}

func (s *consoleStream) ping() {
	defer s.wg.Done()
	t := time.NewTicker(consolePing)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			select {
			case s.send <- []byte("2"):
			case <-s.closed:
				return
			case <-s.broken:
				return
			}
		case <-s.closed:
			return
		case <-s.broken:
			return
		}
	}
}

// Read returns the terminal's bytes; io.EOF once the connection ended or
// the stream was closed.
func (s *consoleStream) Read(p []byte) (int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for len(s.buf) == 0 {
		select {
		case msg, ok := <-s.recv:
			if !ok {
				return 0, io.EOF
			}
			s.buf = msg
		case <-s.broken:
			return 0, io.EOF
		case <-s.closed:
			return 0, io.EOF
		}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// Write sends p as one input frame (its length in bytes).
func (s *consoleStream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	frame := append([]byte("0:"+strconv.Itoa(len(p))+":"), p...)
	if err := s.frame(frame); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Resize tells termproxy the terminal's size.
func (s *consoleStream) Resize(cols, rows uint16) error {
	return s.frame([]byte(fmt.Sprintf("1:%d:%d:", cols, rows)))
}

func (s *consoleStream) frame(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// An ended stream refuses first: go-proxmox's sender outlives a
	// connection its reader saw drop (until Close) and would take the
	// frame, and a select choosing among ready cases at random would
	// report a write lost on a dead connection as sent.
	select {
	case <-s.broken:
		return fmt.Errorf("the console connection ended: %w", s.err)
	case <-s.closed:
		return errors.New("the console is closed")
	default:
	}
	select {
	case s.send <- b:
		return nil
	case <-s.broken:
		return fmt.Errorf("the console connection ended: %w", s.err)
	case <-s.closed:
		return errors.New("the console is closed")
	}
}

// Close ends the session: the websocket (termproxy then exits), the
// goroutines of go-proxmox and of the stream, the session's connections.
func (s *consoleStream) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.closeErr = s.closer()
		s.wg.Wait()
		if s.hc != nil {
			s.hc.CloseIdleConnections()
		}
	})
	return s.closeErr
}
