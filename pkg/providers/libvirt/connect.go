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

// Package libvirt is the libvirt backend: hosts reached over libvirt's
// remote protocol (qemu+tls://HOST/system with a client certificate, or a
// local socket), domains built from libvirtxml structs, boot disks as
// copy-on-write overlays of a base image volume, and user data and
// network config delivered as a NoCloud seed ISO uploaded as a volume.
// Only this package imports go-libvirt.
package libvirt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/firestoned/banlieue/pkg/providers"
)

// tlsPort is libvirtd's TLS port.
const tlsPort = "16514"

// Options are how this process builds domains on every host.
type Options struct {
	// DomainType is kvm, or qemu (software emulation) where KVM does not
	// work (nested, CI).
	DomainType string
	// ShutdownGrace is how long a TrySoft power-off waits for the guest
	// after the ACPI request before the domain is destroyed, for machines
	// that set no powerOffGraceSeconds.
	ShutdownGrace time.Duration
}

// Client is one logged-in libvirt host.
type Client struct {
	l *golibvirt.Libvirt
	// conn is the connection l speaks over: closing it fails every call
	// in flight on it at once (go-libvirt's calls take no context).
	conn net.Conn
	// endpoint is how conn was dialled (endpoint, credentials, TLS
	// settings): a console session dials its own connection the same way
	// (console.go).
	endpoint providers.Connection
	host     string
	opts     Options
}

var _ providers.Backend = &Client{}

// dialTimeout bounds a connect, and the TLS handshake and certificate
// check after it.
const dialTimeout = 15 * time.Second

// Connect logs in to the host at conn.Endpoint: qemu+tls://HOST[:PORT]/system
// with the client certificate and key of conn.Credentials, verified with
// conn.CABundle (or not, with InsecureSkipTLSVerify); or
// qemu+unix:///system?socket=PATH. Failures wrap providers.ErrConnect. A
// host that accepts and never answers fails when ctx ends.
func Connect(ctx context.Context, conn providers.Connection, opts Options) (*Client, error) {
	c, host, err := dial(ctx, conn)
	if err != nil {
		return nil, err
	}
	c = countRPCs(c)
	cl := &Client{l: golibvirt.NewWithDialer(dialers.NewAlreadyConnected(c)), conn: c, endpoint: conn, host: host}
	if err := cl.open(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", providers.ErrConnect, conn.Endpoint, err)
	}
	if host == "" {
		// A local socket: the host is the daemon's own.
		if cl.host, err = cl.hostname(ctx); err != nil {
			cl.closeNow()
			return nil, fmt.Errorf("%w: reading the host name: %v", providers.ErrConnect, err)
		}
	}
	if opts.DomainType == "" {
		opts.DomainType = "kvm"
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 2 * time.Minute
	}
	cl.opts = opts
	return cl, nil
}

// dial opens a connection to conn.Endpoint (not yet logged in) and names
// its host (empty for a local socket). Failures wrap providers.ErrConnect.
func dial(ctx context.Context, conn providers.Connection) (net.Conn, string, error) {
	u, err := url.Parse(conn.Endpoint)
	if err != nil {
		return nil, "", fmt.Errorf("%w: endpoint: %v", providers.ErrConnect, err)
	}
	var c net.Conn
	switch u.Scheme {
	case "qemu+unix":
		path := u.Query().Get("socket")
		if path == "" {
			path = defaultSocket
		}
		c, err = (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "unix", path)
	case "qemu+tls":
		c, err = dialTLS(ctx, u, conn)
	default:
		return nil, "", fmt.Errorf("%w: unsupported endpoint scheme %q", providers.ErrConnect, u.Scheme)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", providers.ErrConnect, err)
	}
	return c, u.Hostname(), nil
}

// defaultSocket is libvirtd's system socket (go-libvirt's default).
const defaultSocket = "/var/run/libvirt/libvirt-sock"

// open opens the QEMU driver's connection, within ctx.
func (c *Client) open(ctx context.Context) error {
	defer c.bound(ctx)()
	if err := c.l.ConnectToURI(golibvirt.QEMUSystem); err != nil {
		c.closeNow()
		return c.timedOut(ctx, err)
	}
	return nil
}

func (c *Client) hostname(ctx context.Context) (string, error) {
	defer c.bound(ctx)()
	h, err := c.l.ConnectGetHostname()
	return h, c.timedOut(ctx, err)
}

// bound makes ctx's end close the connection, failing the calls in flight
// on it, until the returned func is called. go-libvirt's calls take no
// context: without this a host that stopped answering held its callers
// forever. The connection is then dead and the session cache makes another.
func (c *Client) bound(ctx context.Context) (release func()) {
	stop := context.AfterFunc(ctx, c.closeNow)
	return func() { stop() }
}

// timedOut says so when err came from ctx ending (the connection closed
// under the call).
func (c *Client) timedOut(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("host %s did not answer in time (%w): %v", c.host, ctx.Err(), err)
	}
	return err
}

// closeNow drops the connection without a goodbye (which a host that does
// not answer would never acknowledge).
func (c *Client) closeNow() { _ = c.conn.Close() }

// dialTLS connects to libvirtd's TLS port with conn's client certificate.
func dialTLS(ctx context.Context, u *url.URL, conn providers.Connection) (net.Conn, error) {
	cert, err := tls.X509KeyPair(conn.Credentials.ClientCertificate, conn.Credentials.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %v", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: conn.InsecureSkipTLSVerify} //nolint:gosec // the Provider asked for it explicitly
	if len(conn.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(conn.CABundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	port := u.Port()
	if port == "" {
		port = tlsPort
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: dialTimeout}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil, err
	}
	// After the handshake libvirtd sends one byte: 1 when it accepted our
	// certificate (under TLS 1.3 a refused client learns it only now).
	// Without reading it the first call waits forever.
	check := make([]byte, 1)
	deadline := time.Now().Add(dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetReadDeadline(deadline)
	if n, err := c.Read(check); err != nil || n != 1 || check[0] != 1 {
		_ = c.Close()
		if err == nil {
			err = errors.New("the host refused our client certificate")
		}
		return nil, fmt.Errorf("the host's check of our client certificate: %w", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, nil
}

// Close logs out, within ctx: a host that does not acknowledge the
// goodbye has its connection dropped when ctx ends.
func (c *Client) Close(ctx context.Context) error {
	defer c.bound(ctx)()
	return c.timedOut(ctx, c.l.Disconnect())
}

// Sessions keeps one connection per Provider (one per host of a Provider
// of several), replaced when its endpoints, credentials or TLS settings
// change or its connection drops (see providers.Sessions).
type Sessions struct {
	*providers.Sessions[*hostSet]
}

// NewSessions returns an empty session cache building domains with opts.
func NewSessions(opts Options) *Sessions {
	return &Sessions{providers.NewSessions(providers.SessionHooks[*hostSet]{
		Backend: "libvirt",
		Login: func(ctx context.Context, conn providers.Connection) (*hostSet, error) {
			return connectAll(ctx, conn, opts)
		},
		Alive:  func(_ context.Context, s *hostSet) bool { return s.alive() },
		Logout: func(ctx context.Context, s *hostSet) { s.close(ctx) },
	})}
}

// Get returns owner's backend, logging in when needed: one host for an
// endpoint, a set dispatching by location for hosts.
func (s *Sessions) Get(ctx context.Context, owner string, conn providers.Connection) (providers.Backend, error) {
	set, err := s.Sessions.Get(ctx, owner, conn)
	if err != nil {
		return nil, err
	}
	return set.backend(), nil
}
