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
	"sync"
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
	// ShutdownGrace is how long a graceful (ACPI) shutdown may take
	// before the domain is destroyed.
	ShutdownGrace time.Duration
}

// Client is one logged-in libvirt host.
type Client struct {
	l    *golibvirt.Libvirt
	host string
	opts Options
}

var _ providers.Backend = &Client{}

// Connect logs in to the host at conn.Endpoint: qemu+tls://HOST[:PORT]/system
// with the client certificate and key of conn.Credentials, verified with
// conn.CABundle (or not, with InsecureSkipTLSVerify); or
// qemu+unix:///system?socket=PATH. Failures wrap providers.ErrConnect.
func Connect(ctx context.Context, conn providers.Connection, opts Options) (*Client, error) {
	u, err := url.Parse(conn.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: endpoint: %v", providers.ErrConnect, err)
	}
	var l *golibvirt.Libvirt
	host := u.Hostname()
	switch u.Scheme {
	case "qemu+unix":
		var o []dialers.LocalOption
		if s := u.Query().Get("socket"); s != "" {
			o = append(o, dialers.WithSocket(s))
		}
		l = golibvirt.NewWithDialer(dialers.NewLocal(o...))
	case "qemu+tls":
		c, err := dialTLS(ctx, u, conn)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", providers.ErrConnect, err)
		}
		l = golibvirt.NewWithDialer(dialers.NewAlreadyConnected(c))
	default:
		return nil, fmt.Errorf("%w: unsupported endpoint scheme %q", providers.ErrConnect, u.Scheme)
	}
	if err := l.ConnectToURI(golibvirt.QEMUSystem); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", providers.ErrConnect, conn.Endpoint, err)
	}
	if host == "" {
		// A local socket: the host is the daemon's own.
		if host, err = l.ConnectGetHostname(); err != nil {
			_ = l.Disconnect()
			return nil, fmt.Errorf("%w: reading the host name: %v", providers.ErrConnect, err)
		}
	}
	if opts.DomainType == "" {
		opts.DomainType = "kvm"
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 2 * time.Minute
	}
	return &Client{l: l, host: host, opts: opts}, nil
}

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
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 15 * time.Second}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil, err
	}
	// After the handshake libvirtd sends one byte: 1 when it accepted our
	// certificate (under TLS 1.3 a refused client learns it only now).
	// Without reading it the first call waits forever.
	check := make([]byte, 1)
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
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

// Close logs out.
func (c *Client) Close() error { return c.l.Disconnect() }

// Sessions keeps one connection per Provider (one per host of a Provider
// of several), replaced when its endpoints or credentials change or a
// connection drops.
type Sessions struct {
	opts Options
	mu   sync.Mutex
	m    map[string]*session
}

type session struct {
	backend *hostSet
	key     string
}

// NewSessions returns an empty session cache building domains with opts.
func NewSessions(opts Options) *Sessions {
	return &Sessions{opts: opts, m: map[string]*session{}}
}

// Get returns owner's backend, logging in when needed: one host for an
// endpoint, a set dispatching by location for hosts.
func (s *Sessions) Get(ctx context.Context, owner string, conn providers.Connection) (providers.Backend, error) {
	key := conn.Endpoint + "\x00" + conn.CredentialsVersion
	for _, h := range conn.Hosts {
		key += "\x00" + h.Name + "=" + h.Endpoint
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[owner]; ok {
		if cur.key == key && cur.backend.connected() {
			return cur.backend.backend(), nil
		}
		cur.backend.close()
		delete(s.m, owner)
	}
	set, err := connectAll(ctx, conn, s.opts)
	if err != nil {
		return nil, err
	}
	s.m[owner] = &session{backend: set, key: key}
	return set.backend(), nil
}

// connectAll logs in to the endpoint, or to every host.
func connectAll(ctx context.Context, conn providers.Connection, opts Options) (*hostSet, error) {
	set := &hostSet{}
	if len(conn.Hosts) == 0 {
		c, err := Connect(ctx, conn, opts)
		if err != nil {
			return nil, err
		}
		set.clients = []*Client{c}
		return set, nil
	}
	for _, h := range conn.Hosts {
		one := conn
		one.Endpoint, one.Hosts = h.Endpoint, nil
		c, err := Connect(ctx, one, opts)
		if err != nil {
			set.close()
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
		c.host = h.Name
		set.clients = append(set.clients, c)
	}
	return set, nil
}
