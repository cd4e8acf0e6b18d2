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
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"k8s.io/klog/v2"

	"github.com/firestoned/banlieue/pkg/providers"
)

// idleConnsPerVCenter bounds the connections kept open to one vCenter:
// more than the machine workers' default (8) and the inventory's calls.
const idleConnsPerVCenter = 16

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
	sc.DefaultTransport().MaxIdleConnsPerHost = idleConnsPerVCenter
	if len(conn.CABundle) > 0 && !conn.InsecureSkipTLSVerify {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(conn.CABundle) {
			return nil, fmt.Errorf("%w: the CA bundle holds no PEM certificate", providers.ErrConnect)
		}
		sc.DefaultTransport().TLSClientConfig.RootCAs = pool
	}
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", providers.ErrConnect, u.Host, err)
	}
	calls := &counting{next: vc.RoundTripper}
	vc.RoundTripper = calls
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

// Logout ends the session; no earlier call vouches for it any more.
func (c *Client) Logout(ctx context.Context) error {
	err := c.gc.Logout(ctx)
	c.calls.lastOK.Store(0)
	return err
}

// Sessions caches one session per endpoint, user and credentials version,
// checks it is alive before reuse, and logs out the one it replaces.
type Sessions struct {
	mu       sync.Mutex
	sessions map[string]*cached
}

type cached struct {
	*Client
	key string
}

// NewSessions returns an empty cache.
func NewSessions() *Sessions { return &Sessions{sessions: map[string]*cached{}} }

// key never contains the password itself.
func key(conn providers.Connection) string {
	sum := sha256.Sum256(append([]byte(conn.CredentialsVersion+"\x00"), conn.CABundle...))
	return fmt.Sprintf("%s|%s|%t|%s", conn.Endpoint, conn.Credentials.Username, conn.InsecureSkipTLSVerify, hex.EncodeToString(sum[:8]))
}

// Get returns a live session for conn, logging in when needed. owner
// identifies the Provider, so a changed Secret replaces its old session.
func (s *Sessions) Get(ctx context.Context, owner string, conn providers.Connection) (*Client, error) {
	k := key(conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.sessions[owner]; ok {
		if c.key == k && c.alive(ctx) {
			return c.Client, nil
		}
		if err := c.Logout(ctx); err != nil {
			klog.V(2).InfoS("Logout of a replaced vCenter session failed", "provider", owner, "err", err)
		}
		delete(s.sessions, owner)
	}
	c, err := Connect(ctx, conn)
	if err != nil {
		return nil, err
	}
	s.sessions[owner] = &cached{Client: c, key: k}
	return c, nil
}

// Forget logs out and drops owner's session (the Provider is gone).
func (s *Sessions) Forget(ctx context.Context, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.sessions[owner]; ok {
		_ = c.Logout(ctx)
		delete(s.sessions, owner)
	}
}
