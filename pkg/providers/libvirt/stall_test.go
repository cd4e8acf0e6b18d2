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
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/blackhole"
)

// TestDeadHostOfSeveral: a Provider of two hosts, one a real libvirtd and
// one a black hole (accepts, never answers). The login ends at its
// deadline with the live host connected; the inventory lists both and
// names the dead one; the live host serves while the dead one's callers
// are told at once.
func TestDeadHostOfSeveral(t *testing.T) {
	ctx := context.Background()
	hole := blackhole.Start(t)
	ca := newCA(t, "banlieue-test-ca")
	cert, key := ca.issue(t, "banlieue-provider", false)
	conn := providers.Connection{
		Hosts:    []providers.Host{{Name: "live", Endpoint: daemon.URI}, {Name: "dead", Endpoint: "qemu+tls://" + hole.Addr() + "/system"}},
		CABundle: ca.pem, Credentials: providers.Credentials{ClientCertificate: cert, ClientKey: key},
	}
	s := NewSessions(Options{DomainType: "qemu"})
	s.LoginTimeout = 2 * time.Second
	t.Cleanup(func() { s.Forget("ns/two"); s.Wait() })

	start := time.Now()
	b, err := s.Get(ctx, "ns/two", conn)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("one dead host of two failed the Provider: %v", err)
	}
	t.Logf("login to two hosts, one dead: %v", took)
	if took > s.LoginTimeout+2*time.Second {
		t.Errorf("the login took %v, past its %v deadline", took, s.LoginTimeout)
	}

	locs, err := b.Inventory(ctx)
	var degraded *providers.DegradedError
	if !errors.As(err, &degraded) || len(degraded.Unreachable) != 1 || !strings.Contains(degraded.Unreachable[0], "host dead") {
		t.Fatalf("inventory error %v, want the dead host named", err)
	}
	if msg := degraded.Error(); strings.Contains(msg, "PRIVATE KEY") || strings.Contains(msg, string(key[40:80])) {
		t.Errorf("the report leaks the client key: %s", msg)
	}
	if len(locs) != 2 || locs[0].Host != "live" || locs[1].Host != "dead" {
		t.Errorf("inventory %v, want both configured hosts", locs)
	}

	start = time.Now()
	ok, err := b.ImageExists(ctx, failuredomain.Location{Host: "live"}, image)
	if err != nil || !ok {
		t.Errorf("the live host's image: %v, %v", ok, err)
	}
	t.Logf("live host's image check: %v", time.Since(start))
	start = time.Now()
	if _, err := b.ImageExists(ctx, failuredomain.Location{Host: "dead"}, image); err == nil || !strings.Contains(err.Error(), "host dead") {
		t.Errorf("the dead host's image check: %v, want it unreachable", err)
	}
	if waited := time.Since(start); waited > 100*time.Millisecond {
		t.Errorf("a call for the dead host waited %v: it should fail at once", waited)
	}
	if again, err := s.Get(ctx, "ns/two", conn); err != nil || again != b {
		t.Errorf("the set with a dead host was not reused (%v)", err)
	}
}

// TestBlackHoleStallsNobody: while one Provider's login hangs on a black
// hole, another Provider's host is logged in to and used at once.
func TestBlackHoleStallsNobody(t *testing.T) {
	ctx := context.Background()
	hole := blackhole.Start(t)
	ca := newCA(t, "banlieue-test-ca")
	cert, key := ca.issue(t, "banlieue-provider", false)
	dead := providers.Connection{Endpoint: "qemu+tls://" + hole.Addr() + "/system", CABundle: ca.pem,
		Credentials: providers.Credentials{ClientCertificate: cert, ClientKey: key}}
	s := NewSessions(Options{DomainType: "qemu"})
	s.LoginTimeout = 2 * time.Second
	t.Cleanup(func() { s.Forget("ns/live"); s.Wait() })

	stuck := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "ns/dead", dead)
		stuck <- err
	}()
	if !hole.WaitAccepted(1, 5*time.Second) {
		t.Fatal("the dead Provider's login never reached the black hole")
	}
	start := time.Now()
	b, err := s.Get(ctx, "ns/live", providers.Connection{Endpoint: daemon.URI})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.ImageExists(ctx, failuredomain.Location{}, image); err != nil || !ok {
		t.Fatalf("image check: %v, %v", ok, err)
	}
	took := time.Since(start)
	t.Logf("live Provider: login and image check in %v while the other's login hangs", took)
	if took > time.Second {
		t.Errorf("the live Provider waited %v (the hung login's deadline is %v): a lock is shared", took, s.LoginTimeout)
	}
	if err := <-stuck; !errors.Is(err, providers.ErrConnect) {
		t.Errorf("hung login: %v, want ErrConnect", err)
	}
}

// TestSettingsChangeDropsTheConnection: the same endpoint with its TLS
// settings changed is a new connection, and the old one is closed.
func TestSettingsChangeDropsTheConnection(t *testing.T) {
	ctx := context.Background()
	s := NewSessions(Options{DomainType: "qemu"})
	conn := providers.Connection{Endpoint: daemon.URI}
	a, err := s.Get(ctx, "ns/p", conn)
	if err != nil {
		t.Fatal(err)
	}
	conn.InsecureSkipTLSVerify = true
	b, err := s.Get(ctx, "ns/p", conn)
	if err != nil || b == a {
		t.Fatalf("changed TLS settings reused the connection (%v)", err)
	}
	s.Wait()
	if a.(*Client).l.IsConnected() {
		t.Error("the replaced connection is still open")
	}
	s.Forget("ns/p")
	s.Wait()
	if b.(*Client).l.IsConnected() {
		t.Error("the forgotten Provider's connection is still open")
	}
}
