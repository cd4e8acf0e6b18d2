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

package providers

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Default deadlines of a session cache.
const (
	DefaultLoginTimeout  = 30 * time.Second
	DefaultLogoutTimeout = 10 * time.Second
	// DefaultFailureBackoff is how long a failed login is answered from
	// memory before the backend is tried again.
	DefaultFailureBackoff = 10 * time.Second
)

// SessionHooks are what a backend's session cache does on the network.
type SessionHooks[S any] struct {
	// Login opens a session; ctx carries the login deadline.
	Login func(ctx context.Context, conn Connection) (S, error)
	// Alive tells whether a cached session still works (nil: always);
	// ctx carries the login deadline too.
	Alive func(ctx context.Context, s S) bool
	// Logout ends a session that was dropped (nil: nothing to end). It
	// runs in the background, ctx carrying the logout deadline.
	Logout func(ctx context.Context, s S)
}

// Sessions caches one backend session per Provider (the owner), keyed by
// everything that decides what the session is: endpoint, hosts, user, a
// fingerprint of the credentials and the TLS settings. A changed Secret or
// CA bundle, or insecureSkipTLSVerify turned off, makes a new session.
//
// The cache's mutex guards the map only. Each owner's entry has its own
// lock, held while that entry logs in or is checked, so a backend that
// accepts connections and never answers stalls the callers of its own
// Provider (until the login deadline) and nobody else.
type Sessions[S any] struct {
	hooks SessionHooks[S]
	// LoginTimeout bounds a login and a liveness check; LogoutTimeout a
	// dropped session's logout.
	LoginTimeout, LogoutTimeout time.Duration
	// FailureBackoff: after a failed login, the Provider's callers get
	// that failure at once for this long, and while the next login is
	// under way, instead of each waiting for a backend known not to
	// answer (a worker pool would fill with them).
	FailureBackoff time.Duration

	// salt keys the fingerprint, so that a key seen in a heap dump says
	// nothing about the password it was made from.
	salt []byte

	mu      sync.Mutex
	entries map[string]*sessionEntry[S]
	closing sync.WaitGroup
}

// sessionEntry is one owner's session for one key.
type sessionEntry[S any] struct {
	key string
	// lock is held (a token taken) while the entry logs in, is checked or
	// is logged out: a channel, so waiting for it honours a context.
	lock chan struct{}
	// gone is set once the entry left the map: whoever holds it next
	// must not use or fill it.
	gone atomic.Bool
	s    S
	ok   bool
	// failed is the last login's failure, nil once one succeeded.
	failed atomic.Pointer[loginFailure]
}

type loginFailure struct {
	err error
	at  time.Time
}

// NewSessions returns an empty cache calling hooks.
func NewSessions[S any](hooks SessionHooks[S]) *Sessions[S] {
	salt := make([]byte, 32)
	_, _ = rand.Read(salt) // never fails (crypto/rand panics instead)
	return &Sessions[S]{hooks: hooks, LoginTimeout: DefaultLoginTimeout, LogoutTimeout: DefaultLogoutTimeout,
		FailureBackoff: DefaultFailureBackoff, salt: salt, entries: map[string]*sessionEntry[S]{}}
}

// Get returns owner's live session for conn, logging in when there is
// none, the cached one died, or conn's key differs from the cached one's
// (which is then dropped and logged out in the background).
func (s *Sessions[S]) Get(ctx context.Context, owner string, conn Connection) (S, error) {
	k := s.Key(conn)
	for {
		e := s.entry(owner, k)
		if !e.tryAcquire() {
			// A login or check is under way: a backend that failed
			// lately is not waited for again.
			if f := e.failed.Load(); f != nil {
				var zero S
				return zero, f.err
			}
			if err := e.acquire(ctx); err != nil {
				var zero S
				return zero, fmt.Errorf("%w: waiting for another login to the same backend: %w", ErrConnect, err)
			}
		}
		if e.gone.Load() {
			// Replaced or forgotten while we waited: take the new one.
			e.release()
			continue
		}
		sess, err := s.ensure(ctx, e, owner, conn)
		e.release()
		return sess, err
	}
}

// entry returns owner's entry for key k, replacing one of another key.
func (s *Sessions[S]) entry(owner, k string) *sessionEntry[S] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[owner]; ok {
		if e.key == k {
			return e
		}
		s.dropLocked(owner, e, "connection settings or credentials changed")
	}
	e := &sessionEntry[S]{key: k, lock: make(chan struct{}, 1)}
	s.entries[owner] = e
	return e
}

// ensure returns e's session, logging in when e has none or it died. The
// caller holds e.
func (s *Sessions[S]) ensure(ctx context.Context, e *sessionEntry[S], owner string, conn Connection) (S, error) {
	lctx, cancel := context.WithTimeout(ctx, s.LoginTimeout)
	defer cancel()
	if e.ok {
		if s.hooks.Alive == nil || s.hooks.Alive(lctx, e.s) {
			return e.s, nil
		}
		klog.V(2).InfoS("A cached backend session died; logging in again", "provider", owner)
		s.logoutLater(owner, e.s)
		var zero S
		e.s, e.ok = zero, false
	}
	if f := e.failed.Load(); f != nil && time.Since(f.at) < s.FailureBackoff {
		var zero S
		return zero, f.err
	}
	sess, err := s.hooks.Login(lctx, conn)
	if err != nil {
		e.failed.Store(&loginFailure{err: err, at: time.Now()})
		var zero S
		return zero, err
	}
	e.failed.Store(nil)
	e.s, e.ok = sess, true
	return sess, nil
}

// Forget drops owner's session and logs it out in the background: the
// Provider is gone.
func (s *Sessions[S]) Forget(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[owner]; ok {
		s.dropLocked(owner, e, "the Provider was deleted")
	}
}

// Wait waits for the background logouts started so far (tests, shutdown).
func (s *Sessions[S]) Wait() { s.closing.Wait() }

// dropLocked takes e out of the map and logs its session out once
// whoever holds e (a login in flight) lets go. The caller holds s.mu.
func (s *Sessions[S]) dropLocked(owner string, e *sessionEntry[S], why string) {
	delete(s.entries, owner)
	e.gone.Store(true)
	klog.V(2).InfoS("Dropping a backend session", "provider", owner, "reason", why)
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		// The holder is bounded by LoginTimeout (a login or a check).
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.LoginTimeout+s.LogoutTimeout)
		defer cancel()
		if err := e.acquire(ctx); err != nil {
			klog.InfoS("A dropped backend session's login never ended; leaving it", "provider", owner, "err", err)
			return
		}
		defer e.release()
		if e.ok {
			s.logout(owner, e.s)
			var zero S
			e.s, e.ok = zero, false
		}
	}()
}

// logoutLater logs sess out in the background.
func (s *Sessions[S]) logoutLater(owner string, sess S) {
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		s.logout(owner, sess)
	}()
}

// logout ends sess within LogoutTimeout.
func (s *Sessions[S]) logout(owner string, sess S) {
	if s.hooks.Logout == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.LogoutTimeout)
	defer cancel()
	s.hooks.Logout(ctx, sess)
	klog.V(4).InfoS("Logged out of a dropped backend session", "provider", owner)
}

func (e *sessionEntry[S]) acquire(ctx context.Context) error {
	select {
	case e.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *sessionEntry[S]) tryAcquire() bool {
	select {
	case e.lock <- struct{}{}:
		return true
	default:
		return false
	}
}

func (e *sessionEntry[S]) release() { <-e.lock }

// Key is conn's cache key: an HMAC of the endpoint, hosts, user, the
// credentials themselves, their version, the CA bundle and the
// verification flag. It holds no secret in the clear.
func (s *Sessions[S]) Key(conn Connection) string {
	h := hmac.New(sha256.New, s.salt)
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(conn.Endpoint))
	for _, host := range conn.Hosts {
		field([]byte(host.Name))
		field([]byte(host.Endpoint))
	}
	field(nil) // the hosts end
	c := conn.Credentials
	field([]byte(c.Username))
	field([]byte(c.Password))
	field(c.ClientCertificate)
	field(c.ClientKey)
	field([]byte(conn.CredentialsVersion))
	field(conn.CABundle)
	field([]byte(fmt.Sprint(conn.InsecureSkipTLSVerify)))
	return hex.EncodeToString(h.Sum(nil))
}
