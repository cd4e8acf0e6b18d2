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
	"net/http"
	"testing"
	"time"

	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/blackhole"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// TestBlackHoleStallsNobody: a Proxmox VE API that accepts and never
// answers fails its Provider's login at the deadline, and meanwhile
// another Provider's client is obtained and used at once.
func TestBlackHoleStallsNobody(t *testing.T) {
	ctx := context.Background()
	sim := pvesim.New(pvesim.Options{})
	t.Cleanup(sim.Close)
	hole := blackhole.Start(t)
	live := connection(sim, sim.Secret)
	dead := live
	dead.Endpoint = "https://" + hole.Addr() + "/api2/json"
	s := NewSessions(Options{})
	s.LoginTimeout, s.WaitForLogin = 2*time.Second, 500*time.Millisecond

	stuck, hungAt := hole.Hang(t, func() error {
		_, err := s.Get(ctx, "ns/dead", dead)
		return err
	})
	start := time.Now()
	c, err := s.Get(ctx, "ns/live", live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Inventory(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("live Provider: login and inventory in %v while the other's login hangs", took)
	if took > time.Second {
		t.Errorf("the live Provider waited %v (the hung login's deadline is %v): a lock is shared", took, s.LoginTimeout)
	}
	// The caller that started the login waited WaitForLogin, no more.
	blackhole.WaitedAbout(t, <-stuck, providers.ErrLoginPending, s.WaitForLogin)
	// The login itself goes on until its deadline, then fails.
	s.Wait()
	if since := time.Since(hungAt); since < s.LoginTimeout-200*time.Millisecond || since > s.LoginTimeout+2*time.Second {
		t.Errorf("the hung login ended %v after it started, want about its %v deadline", since, s.LoginTimeout)
	}
	// Failed lately: the next callers are answered from memory, at once.
	start = time.Now()
	if _, err := s.Get(ctx, "ns/dead", dead); !errors.Is(err, providers.ErrConnect) {
		t.Errorf("caller after the failure: %v, want ErrConnect", err)
	}
	if waited := time.Since(start); waited > 100*time.Millisecond {
		t.Errorf("a caller after the failure waited %v for a backend known not to answer", waited)
	}
	if n := hole.Accepted(); n != 1 {
		t.Errorf("the black hole was dialled %d times within the failure backoff, want 1", n)
	}
}

// TestKeyChanges: the same endpoint with another token secret, CA bundle
// or verification setting is another client; the same settings are the
// same client; a forgotten Provider's client is dropped.
func TestKeyChanges(t *testing.T) {
	ctx := context.Background()
	sim := pvesim.New(pvesim.Options{})
	t.Cleanup(sim.Close)
	s := NewSessions(Options{})
	conn := connection(sim, sim.Secret)
	a, err := s.Get(ctx, "ns/p", conn)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(ctx, "ns/p", conn); err != nil || b != a {
		t.Fatalf("the same settings made a new client (%v)", err)
	}
	insecure := conn
	insecure.InsecureSkipTLSVerify = true
	b, err := s.Get(ctx, "ns/p", insecure)
	if err != nil || b == a {
		t.Fatalf("insecureSkipTLSVerify turned on reused the client (%v)", err)
	}
	// Verification turned back on: a new client that verifies again.
	c, err := s.Get(ctx, "ns/p", conn)
	if err != nil || c == a || c == b {
		t.Fatalf("verification turned back on reused a client (%v)", err)
	}
	if tr := c.httpClient.Transport.(*http.Transport); tr.TLSClientConfig.InsecureSkipVerify {
		t.Error("the client made after verification was turned back on does not verify")
	}
	otherCA := conn
	otherCA.CABundle = append([]byte("\n"), conn.CABundle...)
	if d, err := s.Get(ctx, "ns/p", otherCA); err != nil || d == c {
		t.Fatalf("another CA bundle reused the client (%v)", err)
	}
	if k1, k2 := s.Key(conn), s.Key(otherCA); k1 == k2 {
		t.Error("the CA bundle is not in the key")
	}
	s.Forget("ns/p")
	s.Wait()
	if e, err := s.Get(ctx, "ns/p", otherCA); err != nil || e == c {
		t.Fatalf("a forgotten Provider's client came back (%v)", err)
	}
}

// TestTokenRotatedMidClone: the token's secret is regenerated while a
// clone runs; the old client's calls are refused; the next Get connects
// with the new secret, and the machine's next reconcile on it waits for
// the recorded clone: one clone, one VM.
func TestTokenRotatedMidClone(t *testing.T) {
	ctx := context.Background()
	sim := pvesim.New(pvesim.Options{TaskDelay: 20 * time.Millisecond, AgentDelay: 50 * time.Millisecond})
	t.Cleanup(sim.Close)
	s := NewSessions(Options{TaskPoll: 10 * time.Millisecond})
	conn := connection(sim, sim.Secret)
	old, err := s.Get(ctx, "ns/p", conn)
	if err != nil {
		t.Fatal(err)
	}
	sim.SetTaskDelay(time.Second)
	spec := machine("team.rotated", "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d")
	rec := &recorder{}
	first := make(chan error, 1)
	go func() {
		_, err := old.EnsureMachine(ctx, spec, rec.record)
		first <- err
	}()
	if err := kwait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return sim.RunningTasks("qmclone") > 0 && rec.last() != "", nil
	}); err != nil {
		t.Fatal("the clone was never recorded")
	}

	sim.SetSecret("6b1d3f5a-0c2e-4d4f-9a6b-8c0e2a4c6e8f")
	rotated := connection(sim, "6b1d3f5a-0c2e-4d4f-9a6b-8c0e2a4c6e8f")
	cur, err := s.Get(ctx, "ns/p", rotated)
	if err != nil {
		t.Fatalf("connect with the rotated token: %v", err)
	}
	if cur == old {
		t.Fatal("the rotated token reused the old client")
	}
	if err := <-first; err == nil {
		t.Log("the old client's call finished before the rotation")
	} else {
		t.Logf("the old client's call ended with %v", err)
	}
	spec.TaskRef = rec.last()
	sim.SetTaskDelay(20 * time.Millisecond)
	if _, err := cur.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := sim.Requests()["POST qemu clone"]; got != 1 {
		t.Errorf("%d clones, want 1", got)
	}
	if n := len(namedVMs(sim, "team.rotated")); n != 1 {
		t.Errorf("%d VMs, want 1", n)
	}
}
