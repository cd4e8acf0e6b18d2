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

package libvirt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"github.com/google/uuid"

	"github.com/firestoned/banlieue/pkg/providers"
)

var (
	_ providers.Consoles = &Client{}
	_ providers.Consoles = &hostSet{}
)

// OpenConsole attaches to the domain's first console: the pty serial port
// every domain gets (domain.go), whose log file QEMU keeps writing
// meanwhile. The session speaks over a libvirt connection of its own,
// dialled as the Client's was: go-libvirt delivers a stream's data from
// its one reader goroutine, which waits while the data is not read, so a
// slow console reader on the shared connection would stall every other
// call of the Provider. libvirt's console lock (VIR_DOMAIN_CONSOLE_SAFE)
// makes a second session ErrConsoleBusy; force (VIR_DOMAIN_CONSOLE_FORCE)
// aborts the holder's stream instead, whoever holds it (virsh console too).
func (c *Client) OpenConsole(ctx context.Context, spec providers.MachineSpec, force bool) (io.ReadWriteCloser, error) {
	id, err := uuid.Parse(spec.InstanceUUID)
	if err != nil {
		return nil, fmt.Errorf("instance UUID %q: %w", spec.InstanceUUID, err)
	}
	// The attach always has a deadline (the caller's, when shorter); the
	// session after it has none: it lasts as long as its user.
	ctx, cancel := context.WithTimeout(ctx, providers.DefaultCallTimeout)
	defer cancel()
	nc, _, err := dial(ctx, c.endpoint)
	if err != nil {
		return nil, fmt.Errorf("console of %s on host %s: %w", spec.Name, c.host, err)
	}
	s := newConsoleSession(nc)
	// go-libvirt's calls take no context: until the attach is done, ctx's
	// end drops the session's connection, which fails the call in flight.
	stop := context.AfterFunc(ctx, s.drop)
	err = s.attach(golibvirt.UUID(id), force)
	stopped := stop()
	if err == nil && !stopped {
		err = ctx.Err() // attached, but the connection was dropped just then
	}
	if err != nil {
		_ = s.Close()
		if !stopped {
			return nil, fmt.Errorf("console of %s: host %s did not answer in time (%w): %v", spec.Name, c.host, ctx.Err(), err)
		}
		return nil, fmt.Errorf("console of %s on host %s: %w", spec.Name, c.host, err)
	}
	return s, nil
}

// OpenConsole reaches the machine's host; the session dials a connection
// of its own to it (Client.OpenConsole).
func (s *hostSet) OpenConsole(ctx context.Context, spec providers.MachineSpec, force bool) (io.ReadWriteCloser, error) {
	c, err := s.client(spec.Location)
	if err != nil {
		return nil, err
	}
	return c.OpenConsole(ctx, spec, force)
}

// consoleSession is one attached console: the guest's output is read from
// out, what is written goes to the guest through kbd.
//
// go-libvirt's DomainOpenConsoleBidirectional (run) blocks for the whole
// session: it copies the incoming stream into screen until libvirtd ends
// it (the VM stopped, another session forced it away) or the connection
// drops, and from a goroutine of its own copies kbdR to libvirtd, checking
// for the end only between reads; so kbdR is a pipe Close can end.
type consoleSession struct {
	conn net.Conn
	l    *golibvirt.Libvirt

	outR *io.PipeReader
	outW *io.PipeWriter
	kbdR *io.PipeReader
	kbdW *io.PipeWriter
	// opened is closed at go-libvirt's first read of kbdR: it starts
	// reading only once libvirtd accepted the open (rpc.go requestStream),
	// and the call itself returns only when the session ends.
	opened    chan struct{}
	openOnce  sync.Once
	closeOnce sync.Once
	// done is closed when run has returned (nil until run starts); err is
	// what the call returned, readable once done is closed.
	done chan struct{}
	err  error
}

func newConsoleSession(nc net.Conn) *consoleSession {
	s := &consoleSession{conn: nc, l: golibvirt.NewWithDialer(dialers.NewAlreadyConnected(nc)), opened: make(chan struct{})}
	s.outR, s.outW = io.Pipe()
	s.kbdR, s.kbdW = io.Pipe()
	return s
}

// attach logs in on the session's connection, finds the domain by its
// UUID as DeleteMachine does, and opens its console.
func (s *consoleSession) attach(id golibvirt.UUID, force bool) error {
	if err := s.l.ConnectToURI(golibvirt.QEMUSystem); err != nil {
		return fmt.Errorf("%w: %v", providers.ErrConnect, err)
	}
	dom, err := s.l.DomainLookupByUUID(id)
	switch {
	case isNotFound(err):
		return fmt.Errorf("%w: the host has no domain %s", providers.ErrNoConsole, uuidString(id))
	case err != nil:
		return fmt.Errorf("looking up domain %s: %w", uuidString(id), err)
	}
	// The open would refuse a stopped domain as well; asking first says
	// so plainly (a domain stopping in between is mapped below).
	active, err := s.l.DomainIsActive(dom)
	if err != nil {
		return fmt.Errorf("reading the state of domain %s: %w", dom.Name, err)
	}
	if active != 1 {
		return fmt.Errorf("%w: domain %s is not running", providers.ErrNoConsole, dom.Name)
	}
	flags := golibvirt.DomainConsoleSafe
	if force {
		flags |= golibvirt.DomainConsoleForce
	}
	s.done = make(chan struct{})
	go s.run(dom, uint32(flags))
	select {
	case <-s.opened:
	case <-s.done:
	}
	select {
	case <-s.opened:
		// libvirtd accepted the open; the session may have ended since
		// (the VM stopped): reads say how.
		return nil
	default:
	}
	if s.err == nil {
		return nil // opened and ended cleanly at once: reads see io.EOF
	}
	return consoleError(dom.Name, s.err)
}

// run is the session: the console call, then everything released.
func (s *consoleSession) run(dom golibvirt.Domain, flags uint32) {
	err := s.l.DomainOpenConsoleBidirectional(dom, nil, openedReader{s}, screen{s.outW}, flags)
	s.err = err
	if err != nil {
		err = fmt.Errorf("the console stream of domain %s ended: %w", dom.Name, err)
	}
	// Writers fail and go-libvirt's sender, blocked reading kbdR, returns;
	// then readers see the end (io.EOF when libvirtd ended it cleanly). In
	// that order: a write after a read saw the end fails, never reaching
	// a sender about to go.
	_ = s.kbdR.CloseWithError(errConsoleEnded)
	_ = s.outW.CloseWithError(err)
	// The connection served only this session: its goroutines end.
	s.drop()
	close(s.done)
}

var errConsoleEnded = errors.New("the console session has ended")

// Read is the guest's output.
func (s *consoleSession) Read(p []byte) (int, error) { return s.outR.Read(p) }

// Write types into the guest's console; it returns once libvirt's sender
// has taken the bytes.
func (s *consoleSession) Write(p []byte) (int, error) { return s.kbdW.Write(p) }

// Close detaches: it drops the session's connection (libvirtd then ends
// the stream and releases the console's lock) and returns once every
// goroutine of the session has. Reads and writes after it fail.
func (s *consoleSession) Close() error {
	s.closeOnce.Do(func() {
		_ = s.outR.CloseWithError(errConsoleEnded)
		_ = s.kbdW.CloseWithError(errConsoleEnded)
		s.drop()
	})
	if s.done != nil {
		<-s.done
	}
	return nil
}

// drop closes the session's connection without a goodbye: that fails the
// call in flight (go-libvirt: ErrInterrupted) and ends its goroutines, and
// libvirtd cleans up a client that went away as one that logged out.
func (s *consoleSession) drop() { _ = s.conn.Close() }

// openedReader is kbdR, noting go-libvirt's first read (opened).
type openedReader struct{ s *consoleSession }

func (r openedReader) Read(p []byte) (int, error) {
	r.s.openOnce.Do(func() { close(r.s.opened) })
	return r.s.kbdR.Read(p)
}

// screen hands the guest's output to the session's reader. Once nobody
// reads (Close closed outR) it discards instead of failing: failing would
// make go-libvirt return from the call while its reader goroutine may be
// blocked delivering the next packet holding the lock the call's cleanup
// takes, and both would hang. Discarding lets the reader go on to see the
// dropped connection.
type screen struct{ w *io.PipeWriter }

func (s screen) Write(p []byte) (int, error) {
	_, _ = s.w.Write(p) // fails only once Close closed outR: then discarded
	return len(p), nil
}

// consoleError maps the open's refusal to the errors of providers.Consoles.
func consoleError(domain string, err error) error {
	var e golibvirt.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("opening the console of domain %s: %w", domain, err)
	}
	switch code := golibvirt.ErrorNumber(e.Code); {
	// qemuDomainOpenConsole: virChrdevOpen found a session and no force.
	case code == golibvirt.ErrOperationFailed && strings.Contains(e.Message, "Active console session"):
		return fmt.Errorf("%w: domain %s: %v", providers.ErrConsoleBusy, domain, err)
	// Stopped meanwhile (virDomainObjCheckActive), or gone.
	case code == golibvirt.ErrOperationInvalid, code == golibvirt.ErrNoDomain:
		return fmt.Errorf("%w: domain %s: %v", providers.ErrNoConsole, domain, err)
	// No such character device, or one that is not a pty (a domain not
	// built by this backend).
	case strings.Contains(e.Message, "cannot find character device"), strings.Contains(e.Message, "not using a PTY"):
		return fmt.Errorf("%w: domain %s: %v", providers.ErrNoConsole, domain, err)
	}
	return fmt.Errorf("opening the console of domain %s: %w", domain, err)
}

func uuidString(id golibvirt.UUID) string { return uuid.UUID(id).String() }
