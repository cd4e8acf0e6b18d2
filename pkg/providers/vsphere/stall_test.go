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

package vsphere

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
	kwait "k8s.io/apimachinery/pkg/util/wait"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/blackhole"
)

// TestLoginToABlackHole: a vCenter that accepts and never answers fails
// the login when its deadline passes, not later.
func TestLoginToABlackHole(t *testing.T) {
	hole := blackhole.Start(t)
	conn := providers.Connection{Endpoint: "https://" + hole.Addr() + "/sdk", InsecureSkipTLSVerify: true,
		Credentials: providers.Credentials{Username: "u", Password: "p"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := Connect(ctx, conn)
	took := time.Since(start)
	if !errors.Is(err, providers.ErrConnect) {
		t.Fatalf("err = %v, want ErrConnect", err)
	}
	if took > 2*time.Second {
		t.Errorf("the login took %v past its 1 s deadline", took)
	}
	if hole.Accepted() == 0 {
		t.Error("the black hole was never dialled")
	}
}

// TestBlackHoleStallsNobody: while one Provider's login hangs on a black
// hole, another Provider's session is obtained at once; the hung login
// ends at the cache's login deadline, and a second caller of the hung
// Provider gives up when its own context ends.
func TestBlackHoleStallsNobody(t *testing.T) {
	ctx := context.Background()
	_, live := vcsim(t)
	hole := blackhole.Start(t)
	dead := live
	dead.Endpoint = "https://" + hole.Addr() + "/sdk"
	s := NewSessions()
	s.LoginTimeout, s.WaitForLogin = 3*time.Second, 500*time.Millisecond

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

	// The hung Provider's next caller waits for that login, but only as
	// long as its own context allows.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := s.Get(short, "ns/dead", dead); !errors.Is(err, providers.ErrConnect) {
		t.Errorf("second caller of the hung Provider: %v, want ErrConnect", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("second caller waited %v past its 200 ms deadline", waited)
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

// rotatingVCSim serves a vCenter whose accepted password the test
// changes, recording every password a login offered.
type rotatingVCSim struct {
	conn     providers.Connection
	password atomic.Pointer[string]
	mu       sync.Mutex
	offered  []string
}

func newRotatingVCSim(t *testing.T) *rotatingVCSim {
	t.Helper()
	r := &rotatingVCSim{}
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	first := "first-s3cret"
	r.password.Store(&first)
	model.Map().SessionManager().ValidLogin = func(req *types.Login) bool {
		r.mu.Lock()
		r.offered = append(r.offered, req.Password)
		r.mu.Unlock()
		return req.UserName == "administrator@vsphere.local" && req.Password == *r.password.Load()
	}
	model.Service.Listen = &url.URL{User: url.UserPassword("administrator@vsphere.local", first)}
	model.Service.TLS = new(tls.Config)
	srv := model.Service.NewServer()
	t.Cleanup(func() {
		// vcsim ends a WaitForUpdatesEx only on an update or
		// CancelWaitForUpdates, not when its session is logged out (as
		// vCenter does): the wait the logout cancelled client-side stays
		// open in the server, and Close would wait for it forever.
		closed := make(chan struct{})
		go func() { srv.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
			t.Log("vcsim kept the logged-out session's wait open; not waiting for it")
		}
		model.Remove()
	})
	r.conn = providers.Connection{
		Endpoint:           "https://" + srv.URL.Host + "/sdk",
		CABundle:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		Credentials:        providers.Credentials{Username: "administrator@vsphere.local", Password: first},
		CredentialsVersion: "1",
	}
	return r
}

// lastOffered is the password of the latest login.
func (r *rotatingVCSim) lastOffered() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.offered) == 0 {
		return ""
	}
	return r.offered[len(r.offered)-1]
}

// lockedRecorder is a recorder read while EnsureMachine runs.
type lockedRecorder struct {
	mu   sync.Mutex
	refs []string
}

func (r *lockedRecorder) record(_ context.Context, ref string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs = append(r.refs, ref)
	return nil
}

func (r *lockedRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refs) == 0 {
		return ""
	}
	return r.refs[len(r.refs)-1]
}

// TestPasswordRotatedMidClone: the password Secret changes while a clone
// runs. The next Get logs in with the new password (the old one is
// refused by then), the old session is logged out, and the machine's next
// reconcile, on the new session, waits for the recorded clone: one clone,
// one VM.
func TestPasswordRotatedMidClone(t *testing.T) {
	ctx := context.Background()
	vc := newRotatingVCSim(t)
	s := NewSessions()
	old, err := s.Get(ctx, "ns/p", vc.conn)
	if err != nil {
		t.Fatal(err)
	}
	spec := providers.MachineSpec{
		Name: "ns-rotated-0", InstanceUUID: "3c1b2a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: template(t, old, "DC0"),
		CPUs: 1, MemoryMiB: 512, Disks: []providers.Disk{{SizeGiB: 20}}, PowerState: infrav1.PowerStatePoweredOff,
	}
	clones := providers.BackendRequests.WithLabelValues("vsphere", "CloneVM_Task")
	before := testutil.ToFloat64(clones)

	simulator.TaskDelay.MethodDelay = map[string]int{"CloneVm": 1500, "LockHandoff": 0}
	defer func() { simulator.TaskDelay.MethodDelay = nil }()
	rec := &lockedRecorder{}
	first := make(chan error, 1)
	go func() {
		_, err := old.EnsureMachine(ctx, spec, rec.record)
		first <- err
	}()
	if err := kwait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return rec.last() != "", nil
	}); err != nil {
		t.Fatal("the clone was never recorded")
	}

	// The Secret is rotated: vCenter takes only the new password now.
	second := "second-s3cret"
	vc.password.Store(&second)
	rotated := vc.conn
	rotated.Credentials.Password, rotated.CredentialsVersion = second, "2"
	cur, err := s.Get(ctx, "ns/p", rotated)
	if err != nil {
		t.Fatalf("login with the rotated password: %v", err)
	}
	if cur == old {
		t.Fatal("the rotated Secret reused the old session")
	}
	if got := vc.lastOffered(); got != second {
		t.Errorf("the last login offered %q, want the new password", got)
	}
	s.Wait()
	if old.alive(ctx) {
		t.Error("the old session is still logged in")
	}
	// The interrupted call ends (its session was logged out under it, or
	// its clone finished first); the next reconcile resumes the task.
	t.Logf("the call on the old session ended with %v", <-first)
	spec.TaskRef = rec.last()
	st, err := cur.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if st.InstanceUUID != spec.InstanceUUID {
		t.Errorf("status %+v", st)
	}
	if got := testutil.ToFloat64(clones) - before; got != 1 {
		t.Errorf("%v clones, want 1", got)
	}
	if n := len(vmsNamed(t, cur, "DC0", spec.Name)); n != 1 {
		t.Errorf("%d VMs named %s, want 1", n, spec.Name)
	}
}

// vmsNamed are the VMs of dc's VM folder tree named name.
func vmsNamed(t *testing.T, c *Client, dc, name string) []string {
	t.Helper()
	vms, err := find.NewFinder(c.gc.Client, false).VirtualMachineList(context.Background(), "/"+dc+"/vm/...")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, vm := range vms {
		if vm.Name() == name {
			out = append(out, vm.InventoryPath)
		}
	}
	return out
}
