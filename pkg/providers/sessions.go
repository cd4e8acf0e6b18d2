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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Default deadlines of a session cache.
const (
	DefaultLoginTimeout  = 30 * time.Second
	DefaultLogoutTimeout = 10 * time.Second
	// DefaultWaitForLogin is the longest a caller waits for a login (or a
	// liveness check) before it is told the backend is not answering yet.
	DefaultWaitForLogin = 3 * time.Second
	// DefaultFailureBackoff is how long a failed login is answered from
	// memory before the backend is tried again.
	DefaultFailureBackoff = 10 * time.Second
)

// ErrLoginPending: a login to the backend is under way and has not
// answered within WaitForLogin; it goes on, and a later call finds its
// session (or its failure).
var ErrLoginPending = fmt.Errorf("%w: the backend has not answered the login yet", ErrConnect)

// SessionHooks are what a backend's session cache does on the network.
type SessionHooks[S any] struct {
	// Backend is the class the cache's sessions and logins are counted
	// under (SessionsOpen, SessionLogins, SessionReconnects); "" counts
	// nothing.
	Backend string
	// Login opens a session; ctx carries the login deadline.
	Login func(ctx context.Context, conn Connection) (S, error)
	// Alive tells whether a cached session still works (nil: always);
	// ctx carries WaitForLogin as its deadline.
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
// No lock is held across network I/O: the cache's mutex guards the map,
// each owner's entry has its own for its fields. A login runs on its own
// goroutine under LoginTimeout; callers wait for it at most WaitForLogin
// (and their own context), and after a failure are answered from memory
// for FailureBackoff. So a backend that accepts connections and never
// answers holds none of its own Provider's callers for long, and nobody
// else's at all: the machine workers they share stay free.
type Sessions[S any] struct {
	hooks SessionHooks[S]
	// LoginTimeout bounds a login; LogoutTimeout a dropped session's
	// logout; WaitForLogin a caller's wait for a login or liveness check;
	// FailureBackoff how long a failed login is answered from memory.
	LoginTimeout, LogoutTimeout, WaitForLogin, FailureBackoff time.Duration

	// salt keys the fingerprint, so that a key seen in a heap dump says
	// nothing about the password it was made from.
	salt []byte

	mu      sync.Mutex
	entries map[string]*sessionEntry[S]
	closing sync.WaitGroup

	// hadMu guards had, the owners that have had a session (until
	// Forget): their next logins are reconnects. It is taken last, under
	// any other lock.
	hadMu sync.Mutex
	had   map[string]bool
}

// sessionEntry is one owner's session for one key.
type sessionEntry[S any] struct {
	key string
	// mu guards the fields below; never held across a network call.
	mu sync.Mutex
	s  S
	ok bool
	// gen counts the sessions stored, so a liveness verdict reached
	// without the lock drops only the session it was about.
	gen      int
	inflight *loginCall[S]
	failed   *loginFailure
	// gone: the entry left the map; a login ending now logs out.
	gone bool
}

// loginCall is a login under way.
type loginCall[S any] struct {
	started time.Time
	done    chan struct{}
	s       S
	err     error
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
		WaitForLogin: DefaultWaitForLogin, FailureBackoff: DefaultFailureBackoff, salt: salt, entries: map[string]*sessionEntry[S]{}, had: map[string]bool{}}
}

// Get returns owner's live session for conn, logging in when there is
// none, the cached one died, or conn's key differs from the cached one's
// (which is then dropped and logged out in the background).
func (s *Sessions[S]) Get(ctx context.Context, owner string, conn Connection) (S, error) {
	var zero S
	e := s.entry(owner, s.Key(conn))
	if sess, ok := s.live(ctx, owner, e); ok {
		return sess, nil
	}
	e.mu.Lock()
	if e.gone {
		// Replaced or forgotten since: take the new entry.
		e.mu.Unlock()
		return s.Get(ctx, owner, conn)
	}
	if e.ok {
		// Another caller logged in meanwhile.
		sess := e.s
		e.mu.Unlock()
		return sess, nil
	}
	if f := e.failed; f != nil && e.inflight == nil && time.Since(f.at) < s.FailureBackoff {
		e.mu.Unlock()
		return zero, f.err
	}
	call := e.inflight
	if call == nil {
		call = &loginCall[S]{started: time.Now(), done: make(chan struct{})}
		e.inflight = call
		if s.hadSession(owner) {
			s.count(SessionReconnects.WithLabelValues)
		}
		s.closing.Add(1)
		go s.login(owner, e, call, conn)
	}
	failed := e.failed
	e.mu.Unlock()
	return s.await(ctx, call, failed)
}

// live returns e's session if it has one that works. The check runs
// without e's lock, under WaitForLogin.
func (s *Sessions[S]) live(ctx context.Context, owner string, e *sessionEntry[S]) (S, bool) {
	e.mu.Lock()
	sess, ok, gen := e.s, e.ok && !e.gone, e.gen
	e.mu.Unlock()
	if !ok {
		return sess, false
	}
	if s.hooks.Alive == nil {
		return sess, true
	}
	actx, cancel := context.WithTimeout(ctx, s.WaitForLogin)
	defer cancel()
	if s.hooks.Alive(actx, sess) {
		return sess, true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ok && e.gen == gen {
		klog.V(2).InfoS("A cached backend session died; logging in again", "provider", owner)
		var zero S
		e.s, e.ok = zero, false
		s.opened(-1)
		s.logoutLater(owner, sess)
	}
	return sess, false
}

// await waits for call, at most WaitForLogin from its start. A login that
// failed before answers at once with that failure while the next runs.
func (s *Sessions[S]) await(ctx context.Context, call *loginCall[S], failed *loginFailure) (S, error) {
	var zero S
	if failed != nil {
		select {
		case <-call.done:
			return call.s, call.err
		default:
			return zero, failed.err
		}
	}
	timer := time.NewTimer(time.Until(call.started.Add(s.WaitForLogin)))
	defer timer.Stop()
	select {
	case <-call.done:
		return call.s, call.err
	case <-timer.C:
		return zero, fmt.Errorf("%w (for %v)", ErrLoginPending, time.Since(call.started).Round(time.Millisecond))
	case <-ctx.Done():
		return zero, fmt.Errorf("%w: waiting for the login: %w", ErrConnect, ctx.Err())
	}
}

// login runs call under LoginTimeout, on no caller's context (the callers
// may have stopped waiting), and stores what it got.
func (s *Sessions[S]) login(owner string, e *sessionEntry[S], call *loginCall[S], conn Connection) {
	defer s.closing.Done()
	ctx, cancel := context.WithTimeout(context.Background(), s.LoginTimeout)
	defer cancel()
	call.s, call.err = s.hooks.Login(ctx, conn)
	e.mu.Lock()
	defer e.mu.Unlock()
	defer close(call.done)
	e.inflight = nil
	switch {
	case call.err != nil:
		s.count(SessionLogins.WithLabelValues, "failure")
		e.failed = &loginFailure{err: call.err, at: time.Now()}
		klog.V(2).InfoS("Backend login failed", "provider", owner, "took", time.Since(call.started), "err", call.err)
	case e.gone:
		s.count(SessionLogins.WithLabelValues, "success")
		s.logoutLater(owner, call.s)
	default:
		s.count(SessionLogins.WithLabelValues, "success")
		e.failed = nil
		e.s, e.ok = call.s, true
		e.gen++
		s.opened(1)
		s.hadMu.Lock()
		s.had[owner] = true
		s.hadMu.Unlock()
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
	e := &sessionEntry[S]{key: k}
	s.entries[owner] = e
	return e
}

// Forget drops owner's session and logs it out in the background: the
// Provider is gone.
func (s *Sessions[S]) Forget(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[owner]; ok {
		s.dropLocked(owner, e, "the Provider was deleted")
	}
	s.hadMu.Lock()
	delete(s.had, owner)
	s.hadMu.Unlock()
}

// Wait waits for the logins under way and the background logouts
// started so far (tests, shutdown).
func (s *Sessions[S]) Wait() { s.closing.Wait() }

// dropLocked takes e out of the map and logs its session out in the
// background; a login under way for it logs out when it ends. The caller
// holds s.mu (e.mu is taken after it, never the other way round).
func (s *Sessions[S]) dropLocked(owner string, e *sessionEntry[S], why string) {
	delete(s.entries, owner)
	klog.V(2).InfoS("Dropping a backend session", "provider", owner, "reason", why)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gone = true
	if e.ok {
		s.logoutLater(owner, e.s)
		var zero S
		e.s, e.ok = zero, false
		s.opened(-1)
	}
}

// hadSession tells whether owner has had a session since it was last
// forgotten.
func (s *Sessions[S]) hadSession(owner string) bool {
	s.hadMu.Lock()
	defer s.hadMu.Unlock()
	return s.had[owner]
}

// opened adds n to the sessions open of the cache's backend.
func (s *Sessions[S]) opened(n float64) {
	if s.hooks.Backend != "" {
		SessionsOpen.WithLabelValues(s.hooks.Backend).Add(n)
	}
}

// count increments the counter of the cache's backend and labels.
func (s *Sessions[S]) count(vec func(...string) prometheus.Counter, labels ...string) {
	if s.hooks.Backend != "" {
		vec(append([]string{s.hooks.Backend}, labels...)...).Inc()
	}
}

// logoutLater logs sess out in the background, within LogoutTimeout.
func (s *Sessions[S]) logoutLater(owner string, sess S) {
	if s.hooks.Logout == nil {
		return
	}
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.LogoutTimeout)
		defer cancel()
		s.hooks.Logout(ctx, sess)
		klog.V(4).InfoS("Logged out of a dropped backend session", "provider", owner)
	}()
}

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
