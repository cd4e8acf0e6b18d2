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
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
)

// TestCallsCountedByTheServer: each method a client calls is counted once
// by name, the simulator's own session (DHCP polling twice a second) not
// at all, and the client's session is seen until it logs out.
func TestCallsCountedByTheServer(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{Datacenters: 1, Clusters: 1, Template: "tmpl", Username: "u@vsphere.local", Password: "p", DHCP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Sessions(ctx); err != nil || n != 0 {
		t.Fatalf("sessions before any client: %d, %v; want 0", n, err)
	}
	gc, err := Login(ctx, s.Endpoint, "u@vsphere.local", "p")
	if err != nil {
		t.Fatal(err)
	}
	before := s.Calls()
	const asked = 3
	for range asked {
		if _, err := methods.GetCurrentTime(ctx, gc.Client); err != nil {
			t.Fatal(err)
		}
	}
	// The simulator's own DHCP polling calls meanwhile, uncounted.
	ownBefore := s.ownCalls()
	for s.ownCalls() < ownBefore+4 {
		time.Sleep(50 * time.Millisecond)
	}
	after := s.Calls()
	if got := after["CurrentTime"] - before["CurrentTime"]; got != asked {
		t.Errorf("CurrentTime counted %d times, want %d", got, asked)
	}
	for m, n := range after {
		if m != "CurrentTime" && n != before[m] {
			t.Errorf("%s counted %d more times though the client did not call it", m, n-before[m])
		}
	}
	if n, err := s.Sessions(ctx); err != nil || n != 1 {
		t.Errorf("sessions with one client logged in: %d, %v; want 1", n, err)
	}
	if err := gc.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sessions(ctx); err != nil || n != 0 {
		t.Errorf("sessions after the client logged out: %d, %v; want 0", n, err)
	}
}

func (s *Simulator) ownCalls() int {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	return s.calls.ownCalls
}
