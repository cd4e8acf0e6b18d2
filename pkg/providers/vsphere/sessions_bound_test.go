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
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmware/govmomi/vim25/mo"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// sessionsOnVCenter counts the sessions vCenter holds, as its
// SessionManager lists them (the observer's own among them).
func sessionsOnVCenter(t *testing.T, observer *Client) int {
	t.Helper()
	var sm mo.SessionManager
	if err := observer.gc.RetrieveOne(context.Background(), *observer.gc.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
		t.Fatal(err)
	}
	return len(sm.SessionList)
}

// TestConcurrentClonesShareOneSession: 200 clones at once for one Provider
// open one vCenter session, whatever the load (CAPV's users meet session
// exhaustion at scale): every caller gets the Provider's cached session.
func TestConcurrentClonesShareOneSession(t *testing.T) {
	ctx := context.Background()
	_, conn := vcsim(t)
	observer, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Logout(ctx)
	tmpl := template(t, observer, "DC0")
	before := sessionsOnVCenter(t, observer)
	logins := providers.SessionLogins.WithLabelValues("vsphere", "success")
	loginsBefore := testutil.ToFloat64(logins)

	sessions := NewSessions()
	defer sessions.Wait()
	defer sessions.Forget("bench/lab")
	const clones = 200
	noop := func(context.Context, string) error { return nil }
	var wg sync.WaitGroup
	errs := make(chan error, clones)
	for i := range clones {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := sessions.Get(ctx, "bench/lab", conn)
			if err != nil {
				errs <- err
				return
			}
			spec := providers.MachineSpec{
				Name: fmt.Sprintf("load-%d", i), InstanceUUID: fmt.Sprintf("00000000-0000-4000-9000-%012d", i),
				Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, PowerState: infrav1.PowerStatePoweredOn,
			}
			if _, err := c.EnsureMachine(ctx, spec, noop); err != nil {
				errs <- fmt.Errorf("%s: %w", spec.Name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	opened := sessionsOnVCenter(t, observer) - before
	loggedIn := testutil.ToFloat64(logins) - loginsBefore
	t.Logf("%d concurrent clones: %d sessions opened on vCenter, %v logins", clones, opened, loggedIn)
	if opened != 1 || loggedIn != 1 {
		t.Errorf("%d concurrent clones opened %d sessions on vCenter (%v logins), want 1", clones, opened, loggedIn)
	}
}

// TestKeepAlive: an open session tells vCenter it is in use every
// keepAliveEvery (a CurrentTime call, counted), so an idle Provider keeps
// its session; the keep-alive ends with the session.
func TestKeepAlive(t *testing.T) {
	was := keepAliveEvery
	keepAliveEvery = 20 * time.Millisecond
	t.Cleanup(func() { keepAliveEvery = was })
	ctx := context.Background()
	_, conn := vcsim(t)
	kept := calls("CurrentTime")
	c, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); kept() < 3; time.Sleep(keepAliveEvery) {
		if time.Now().After(deadline) {
			t.Fatalf("%v keep-alive calls in 5 s of an idle session, want 3 or more (one per %s)", kept(), keepAliveEvery)
		}
	}
	if !c.alive(ctx) {
		t.Error("the session kept alive is not")
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	atLogout := kept()
	time.Sleep(5 * keepAliveEvery)
	if n := kept() - atLogout; n != 0 {
		t.Errorf("%v keep-alive calls after the session was logged out, want none", n)
	}
}
