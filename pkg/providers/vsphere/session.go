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
// Package vsphere is banlieue's vSphere backend on govmomi: sessions,
// inventory and template checks (and, next, the VM lifecycle). Nothing
// outside this package imports govmomi.
package vsphere

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/session/keepalive"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"k8s.io/klog/v2"

	"github.com/firestoned/banlieue/pkg/providers"
)

// dialTimeout bounds a TCP connect and TLS handshake to vCenter.
const dialTimeout = 15 * time.Second

// idleConnsPerVCenter bounds the connections kept open to one vCenter:
// more than the machine workers' default (8) and the inventory's calls.
const idleConnsPerVCenter = 16

// keepAliveEvery is how often an open session tells vCenter it is in
// use (one CurrentTime call, counted with the others): well inside
// vCenter's idle timeout (30 minutes by default), so a Provider quiet for
// longer keeps its one session instead of logging in again. A variable
// so a test can watch it tick.
var keepAliveEvery = 5 * time.Minute

// Connect logs in to a vCenter and returns a Backend for it.
func Connect(ctx context.Context, conn providers.Connection) (*Client, error) {
	u, err := soap.ParseURL(conn.Endpoint)
	if err != nil || u == nil {
		return nil, fmt.Errorf("%w: endpoint %q: %v", providers.ErrConnect, conn.Endpoint, err)
	}
	sc := soap.NewClient(u, conn.InsecureSkipTLSVerify)
	// govmomi speaks HTTP/1.1 and Go keeps 2 idle connections per host by
	// default: with more calls in flight (the machine workers, inventory
	// walks) every call past two dialled and shook hands with TLS again,
	// an eighth of the provider's CPU in the benchmark's profile.
	t := sc.DefaultTransport()
	t.MaxIdleConnsPerHost = idleConnsPerVCenter
	if len(conn.CABundle) > 0 && !conn.InsecureSkipTLSVerify {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(conn.CABundle) {
			return nil, fmt.Errorf("%w: the CA bundle holds no PEM certificate", providers.ErrConnect)
		}
		t.TLSClientConfig.RootCAs = pool
	}
	// govmomi's own TLS dial (tls.Dial) ignores the context and has no
	// timeout: a host that accepts and never answers kept a goroutine and
	// a socket forever for every try. No thumbprints are used here, so a
	// plain dialer honouring ctx and a timeout does the same job.
	t.DialTLS = nil //nolint:staticcheck // cleared so only DialTLSContext dials
	t.DialTLSContext = (&tls.Dialer{NetDialer: &net.Dialer{Timeout: dialTimeout}, Config: t.TLSClientConfig}).DialContext
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", providers.ErrConnect, u.Host, err)
	}
	// The keep-alive starts at login and stops at logout (or at its first
	// refused call); it calls through calls, counted and with callTimeout.
	var calls *counting
	alive := keepalive.NewHandlerSOAP(vc.RoundTripper, keepAliveEvery, func() error {
		_, err := methods.GetCurrentTime(context.Background(), calls)
		return err
	})
	calls = newCounting(alive)
	vc.RoundTripper = calls
	calls.tasks = newTaskWatch(vc, calls.ended)
	c := &govmomi.Client{Client: vc, SessionManager: session.NewManager(vc)}
	if err := c.Login(ctx, url.UserPassword(conn.Credentials.Username, conn.Credentials.Password)); err != nil {
		return nil, fmt.Errorf("%w: logging in to %s as %s: %v", providers.ErrConnect, u.Host, conn.Credentials.Username, err)
	}
	return &Client{gc: c, calls: calls, refs: newRefCache()}, nil
}

// Client is a logged-in vCenter session.
type Client struct {
	gc    *govmomi.Client
	calls *counting
	refs  *refCache
}

var _ providers.Backend = &Client{}

// alive tells whether the session still works: a call answered lately
// says so, else vCenter is asked.
func (c *Client) alive(ctx context.Context) bool {
	if c.calls.trusted() {
		return true
	}
	s, err := c.gc.SessionManager.UserSession(ctx)
	return err == nil && s != nil
}

// Logout ends the session; no earlier call vouches for it any more, and
// the calls still in flight on it are cancelled.
func (c *Client) Logout(ctx context.Context) error {
	err := c.gc.Logout(ctx)
	c.calls.lastOK.Store(0)
	c.calls.endNow()
	return err
}

// Sessions caches one vCenter session per Provider, checked alive before
// reuse; a session of other settings or credentials is logged out in the
// background (see providers.Sessions).
type Sessions = providers.Sessions[*Client]

// NewSessions returns an empty cache.
func NewSessions() *Sessions {
	return providers.NewSessions(providers.SessionHooks[*Client]{
		Backend: "vsphere",
		Login:   Connect,
		Alive:   func(ctx context.Context, c *Client) bool { return c.alive(ctx) },
		Logout: func(ctx context.Context, c *Client) {
			if err := c.Logout(ctx); err != nil {
				klog.V(2).InfoS("Logout of a dropped vCenter session failed", "err", err)
			}
		},
	})
}
