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

package vcsim

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// callCounter counts the SOAP methods the simulated vCenter serves, by
// name, as a vCenter's own statistics would: the server side of what a
// client says it called. The simulator's own sessions (its DHCP stand-in,
// its set-up) are left out: no client of the vCenter made those calls.
type callCounter struct {
	mu       sync.Mutex
	byMethod map[string]int
	own      map[string]bool
	// ownCalls are the calls left out.
	ownCalls int
}

func newCallCounter() *callCounter {
	return &callCounter{byMethod: map[string]int{}, own: map[string]bool{}}
}

// handle is the registry's hook, run before every method is dispatched;
// it changes nothing about the call.
func (c *callCounter) handle(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	key := ""
	if ctx.Session != nil {
		key = ctx.Session.Key
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.own[key] {
		c.ownCalls++
	} else {
		c.byMethod[m.Name]++
	}
	return nil, nil
}

// leaveOut stops counting the calls of gc's session.
func (c *callCounter) leaveOut(ctx context.Context, gc *govmomi.Client) error {
	us, err := gc.SessionManager.UserSession(ctx)
	if err != nil || us == nil {
		return fmt.Errorf("reading the simulator's own session: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own[us.Key] = true
	return nil
}

func (c *callCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byMethod)
}

// Calls are the SOAP methods the simulator served to its clients since it
// started, by method name (its own sessions left out).
func (s *Simulator) Calls() map[string]int { return s.calls.counts() }

// Sessions is how many sessions the simulator holds open for its clients
// (its own left out), as its SessionManager's sessionList shows them.
func (s *Simulator) Sessions(ctx context.Context) (int, error) {
	var sm mo.SessionManager
	if err := s.gc.RetrieveOne(ctx, *s.gc.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
		return 0, fmt.Errorf("reading the simulator's sessions: %w", err)
	}
	n := 0
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	for _, us := range sm.SessionList {
		if !s.calls.own[us.Key] {
			n++
		}
	}
	return n, nil
}
