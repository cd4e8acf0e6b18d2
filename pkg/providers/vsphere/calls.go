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
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/providers"
)

// sessionTrust is how long a call that succeeded vouches for its session:
// far below vCenter's idle timeout (30 minutes by default), so a session
// in use is not asked whether it is alive before every reconcile.
const sessionTrust = time.Minute

// callTimeout bounds one SOAP call, whatever its caller's deadline: a
// vCenter that stops answering fails the call, and the next Get finds the
// session dead instead of waiting with it.
const callTimeout = 30 * time.Second

// longPoll are the methods that wait for a change (a task's progress) by
// design: the caller's deadline (the machine call's) bounds them.
var longPoll = map[string]bool{"WaitForUpdatesEx": true, "WaitForUpdates": true, "WaitForChange": true}

// counting wraps a session's round tripper: it counts every SOAP method
// called (banlieue_provider_backend_requests_total) and remembers when a
// call last succeeded and whether the session was refused since.
type counting struct {
	next soap.RoundTripper
	// lastOK is the Unix nanoseconds of the last call answered without a
	// NotAuthenticated fault; 0 once one was refused.
	lastOK atomic.Int64
	// ended is cancelled when the session is logged out: the calls still
	// in flight on it (a task's wait, which vCenter may never end for a
	// dead session) fail then, and their callers retry on the new session.
	ended  context.Context
	endNow context.CancelFunc
	// tasks answers the session's task waits (taskWatch).
	tasks *taskWatch
}

func newCounting(next soap.RoundTripper) *counting {
	c := &counting{next: next}
	c.ended, c.endNow = context.WithCancel(context.Background())
	return c
}

func (c *counting) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	m := method(req)
	providers.BackendRequests.WithLabelValues("vsphere", m).Inc()
	var cancel context.CancelFunc
	if longPoll[m] {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
	}
	defer cancel()
	defer context.AfterFunc(c.ended, cancel)()
	err := c.next.RoundTrip(ctx, req, res)
	switch {
	case notAuthenticated(err) || refusedObjects(res):
		c.lastOK.Store(0)
	case err == nil || soap.IsSoapFault(err) || soap.IsVimFault(err):
		// A fault is an answer: the session was accepted.
		c.lastOK.Store(time.Now().UnixNano())
	}
	return err
}

// notAuthenticated tells whether vCenter refused the session.
func notAuthenticated(err error) bool {
	if !soap.IsSoapFault(err) {
		return false
	}
	switch soap.ToSoapFault(err).VimFault().(type) {
	case types.NotAuthenticated, *types.NotAuthenticated:
		return true
	}
	return false
}

// refusedObjects tells whether a property read came back with the
// session refused object by object (vcsim answers so, not with a fault).
func refusedObjects(res soap.HasFault) bool {
	r, ok := res.(*methods.RetrievePropertiesExBody)
	if !ok || r.Res == nil || r.Res.Returnval == nil {
		return false
	}
	for _, o := range r.Res.Returnval.Objects {
		for _, m := range o.MissingSet {
			if _, ok := m.Fault.Fault.(*types.NotAuthenticated); ok {
				return true
			}
		}
	}
	return false
}

// trusted tells whether a call succeeded on the session lately.
func (c *counting) trusted() bool {
	last := c.lastOK.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < sessionTrust
}

// method names a request by its body's type (RetrievePropertiesExBody is
// RetrievePropertiesEx).
func method(req soap.HasFault) string {
	t := reflect.TypeOf(req)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.TrimSuffix(t.Name(), "Body")
}
