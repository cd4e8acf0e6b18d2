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

package devenv

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"
)

// TestNodesTakeSlots: two environments' nodes take two slots at once; a
// third waits while both run and takes the slot the first one frees.
func TestNodesTakeSlots(t *testing.T) {
	nodeLockDir = t.TempDir()
	ctx := context.Background()
	first, err := takeSlot(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	second, err := takeSlot(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if first.index == second.index || first.bridge() == second.bridge() || first.subnet() == second.subnet() ||
		first.gateway() == second.gateway() || first.cgroupRoot() == second.cgroupRoot() {
		t.Fatalf("two running nodes share a slot: %+v and %+v", *first, *second)
	}
	got := make(chan *slot)
	go func() {
		s, err := takeSlot(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	select {
	case <-got:
		t.Fatal("a third node started while two held both slots")
	case <-time.After(1500 * time.Millisecond):
	}
	first.release()
	select {
	case third := <-got:
		if third.index != first.index {
			t.Errorf("the third node took slot %d, want the freed %d", third.index, first.index)
		}
		third.release()
	case <-time.After(10 * time.Second):
		t.Fatal("the third node never started after the first stopped")
	}
	second.release()
}

// TestFirstInLastOut: the first node in records the machine's state, a
// node arriving while it runs gets that record (not the machine as the
// first one changed it), and only the last one out puts the machine back.
func TestFirstInLastOut(t *testing.T) {
	nodeLockDir = t.TempDir()
	ctx := context.Background()
	reads := 0
	read := func(links ...string) func() (MachineState, error) {
		return func() (MachineState, error) { reads++; return MachineState{Links: links}, nil }
	}
	a, err := takeSlot(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	beforeA, err := a.arrive(read("lo", "eth0"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := takeSlot(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	beforeB, err := b.arrive(read("lo", "eth0", "cni0"))
	if err != nil {
		t.Fatal(err)
	}
	if reads != 1 || !reflect.DeepEqual(beforeA, beforeB) {
		t.Errorf("the second node read the machine itself (%d reads) or got %+v, want the first's %+v", reads, beforeB, beforeA)
	}
	lastOut := ""
	if err := a.leave(func() { lastOut = "a" }); err != nil {
		t.Fatal(err)
	}
	a.release()
	if err := b.leave(func() { lastOut = "b" }); err != nil {
		t.Fatal(err)
	}
	b.release()
	if lastOut != "b" {
		t.Errorf("the machine was put back by %q, want the last node out (b)", lastOut)
	}
	if _, err := os.Stat(firstState()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first node's record outlived the last node: %v", err)
	}
	// Alone again: a node records the machine anew.
	c, err := takeSlot(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if _, err := c.arrive(read("lo")); err != nil || reads != 2 {
		t.Errorf("a node alone did not read the machine (%d reads, %v)", reads, err)
	}
}

// TestSlotNames: a node's tear-down removes the rules naming its bridge or
// addresses and no other node's.
func TestSlotNames(t *testing.T) {
	zero, one := &slot{index: 0}, &slot{index: 1}
	for _, tc := range []struct {
		rule      string
		zero, one bool
	}{
		{"nat -A PREROUTING -d 10.96.0.1/32 -i cni0 -p tcp -m tcp --dport 443 -j DNAT --to-destination 127.0.0.1:6443", true, false},
		{"nat -A PREROUTING -d 10.89.0.1/32 -i cni1 -p udp -m udp --dport 53 -j DNAT --to-destination 127.0.0.1:5353", false, true},
		{"filter -A FORWARD -s 10.89.0.0/16 -j ACCEPT", false, true},
		{"filter -A FORWARD -o cni0 -j ACCEPT", true, false},
		{"filter -A FORWARD -o cni10 -j ACCEPT", false, false},
		{"filter -A KUBE-FIREWALL -j DROP", false, false},
		{"nat :CNI-1234 -", false, false},
	} {
		if got := zero.names(tc.rule); got != tc.zero {
			t.Errorf("slot 0 names %q: %v, want %v", tc.rule, got, tc.zero)
		}
		if got := one.names(tc.rule); got != tc.one {
			t.Errorf("slot 1 names %q: %v, want %v", tc.rule, got, tc.one)
		}
	}
	for name, want := range map[string]bool{"cni0": true, "cni3": true, "veth1234": true, "cnix": false, "eth0": false, "virbr-bl": false} {
		if nodeLink(name) != want {
			t.Errorf("nodeLink(%q) = %v, want %v", name, !want, want)
		}
	}
}

// TestNodeSlots: how many nodes may run at once, from the environment.
func TestNodeSlots(t *testing.T) {
	for v, want := range map[string]int{"": defaultNodeSlots, "1": 1, "3": 3, "0": 0, "x": 0, "9": 0} {
		t.Setenv(NodeSlotsEnv, v)
		got, err := nodeSlots()
		if (err != nil) != (want == 0) || (want != 0 && got != want) {
			t.Errorf("%s=%q: %d, %v; want %d", NodeSlotsEnv, v, got, err, want)
		}
	}
}
