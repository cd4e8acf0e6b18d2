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
	"slices"
	"strings"
	"testing"
	"time"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// poweredOn builds a machine and returns it running, with its VM.
func poweredOn(t *testing.T, sim *pvesim.Simulator, c *Client, name, uid string) (providers.MachineSpec, *recorder, pvesim.VM) {
	t.Helper()
	spec, rec := machine(name, uid), &recorder{}
	if st, err := c.EnsureMachine(context.Background(), spec, rec.record); err != nil || st.PowerState != infrav1.PowerStatePoweredOn {
		t.Fatalf("building %s: %+v, %v", name, st, err)
	}
	return spec, rec, namedVMs(sim, name)[0]
}

// Suspended hibernates: PVE's suspend with todisk=1, the VM stopped with
// the lock "suspended" and its memory in a vmstate volume; PoweredOn
// starts it, which resumes the guest (no boot) and drops the volume.
func TestHibernate(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	spec, rec, vm := poweredOn(t, sim, c, "team.sleepy", "0b5c1f7e-5a3c-4d0e-9f1a-2f4b6c8d0e11")
	before := sim.Requests()
	spec.PowerState = infrav1.PowerStateSuspended
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil || st.PowerState != infrav1.PowerStateSuspended {
		t.Fatalf("suspending: %+v, %v", st, err)
	}
	vm = namedVMs(sim, spec.Name)[0]
	state, _ := vm.Config["vmstate"].(string)
	if vm.Status != "stopped" || vm.Lock != "suspended" || vm.Paused || !strings.Contains(state, "state-suspend") || !slices.Contains(sim.Volumes(), "pve1/"+state) {
		t.Fatalf("hibernated VM: status %s, lock %q, paused %t, vmstate %q, volumes %v", vm.Status, vm.Lock, vm.Paused, state, sim.Volumes())
	}
	if got := sim.Requests()["POST qemu suspend"] - before["POST qemu suspend"]; got != 1 {
		t.Errorf("%d suspend requests, want 1", got)
	}
	// Ensured again while hibernated: nothing changes (its config is
	// locked), it stays Suspended.
	if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil || st.PowerState != infrav1.PowerStateSuspended {
		t.Fatalf("ensured while hibernated: %+v, %v", st, err)
	}
	boots := vm.Boots
	spec.PowerState = infrav1.PowerStatePoweredOn
	if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil || st.PowerState != infrav1.PowerStatePoweredOn {
		t.Fatalf("resuming: %+v, %v", st, err)
	}
	vm = namedVMs(sim, spec.Name)[0]
	if vm.Status != "running" || vm.Lock != "" || vm.Boots != boots || vm.Config["vmstate"] != nil {
		t.Errorf("resumed VM: status %s, lock %q, boots %d (want %d), vmstate %v", vm.Status, vm.Lock, vm.Boots, boots, vm.Config["vmstate"])
	}
	for _, v := range sim.Volumes() {
		if strings.Contains(v, "state-suspend") {
			t.Errorf("state volume left after the resume: %s", v)
		}
	}
}

// The power-off modes, counted in the requests pvesim served: Hard stops
// at once; Soft asks the guest (status/shutdown) and never stops it;
// TrySoft asks, waits out the grace from the recorded request (a later
// call, as after a provider restart, does not ask again), then stops.
// pvesim plays the guest: it answers the shutdown request, or ignores it
// (IgnoreShutdown) as a hung guest does.
func TestPowerOffModes(t *testing.T) {
	cases := []struct {
		name            string
		mode            infrav1.PowerOffMode
		guestIgnores    bool
		shutdowns, stop int
		off             bool
	}{
		{"hard", infrav1.PowerOffModeHard, false, 0, 1, true},
		{"soft, the guest answers", infrav1.PowerOffModeSoft, false, 1, 0, true},
		{"soft, the guest ignores it", infrav1.PowerOffModeSoft, true, 2, 0, false},
		{"try-soft, the guest answers", infrav1.PowerOffModeTrySoft, false, 1, 0, true},
		{"try-soft, the guest ignores it", infrav1.PowerOffModeTrySoft, true, 1, 1, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim, c := simulate(t)
			ctx := context.Background()
			spec, rec, vm := poweredOn(t, sim, c, "team.off", "7d0a3b52-1c4e-4f6a-8b2d-3e5f7a9c1d2"+string(rune('0'+i)))
			sim.IgnoreShutdown(vm.VMID, tc.guestIgnores)
			before := sim.Requests()
			spec.PowerState, spec.PowerOffMode, spec.PowerOffGrace = infrav1.PowerStatePoweredOff, tc.mode, 300*time.Millisecond
			var asked []time.Time
			spec.RecordSoftPowerOff = func(_ context.Context, at time.Time) error { asked = append(asked, at); return nil }
			var st providers.MachineStatus
			var err error
			// Calls as the reconciler's polls make them, each with the
			// request time the status recorded, for a grace and a half:
			// Soft asks again once the grace has passed.
			for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if len(asked) > 0 {
					spec.SoftPowerOffTime = asked[len(asked)-1]
				}
				if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
					t.Fatal(err)
				}
				if st.PowerState == infrav1.PowerStatePoweredOff {
					break
				}
			}
			after := sim.Requests()
			shutdowns, stops := after["POST qemu shutdown"]-before["POST qemu shutdown"], after["POST qemu stop"]-before["POST qemu stop"]
			if shutdowns != tc.shutdowns || stops != tc.stop || len(asked) != tc.shutdowns || (st.PowerState == infrav1.PowerStatePoweredOff) != tc.off {
				t.Errorf("%d shutdown and %d stop requests, %d recorded, state %s; want %d, %d, off %t", shutdowns, stops, len(asked), st.PowerState, tc.shutdowns, tc.stop, tc.off)
			}
		})
	}
}

// A resize PVE keeps pending while the VM runs (cores, memory) restarts
// it as spec.powerOffMode says, counted in the requests pvesim served:
// Hard stops and starts it in one call, as before; Soft and TrySoft ask
// the guest (status/shutdown, its time recorded) and the VM reports
// Restarting, still running with its old shape, until the guest is off;
// then a call starts it with the new one. A guest that ignores the
// request is stopped after the grace (TrySoft).
func TestResizeHonoursPowerOffMode(t *testing.T) {
	cases := []struct {
		name            string
		mode            infrav1.PowerOffMode
		guestIgnores    bool
		shutdowns, stop int
		restarting      bool
	}{
		{"hard", infrav1.PowerOffModeHard, false, 0, 1, false},
		{"soft", infrav1.PowerOffModeSoft, false, 1, 0, true},
		{"try-soft", infrav1.PowerOffModeTrySoft, false, 1, 0, true},
		{"try-soft, the guest ignores it", infrav1.PowerOffModeTrySoft, true, 1, 1, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim, c := simulate(t)
			ctx := context.Background()
			spec, rec, vm := poweredOn(t, sim, c, "team.resize", "8e1b4c63-2d5f-4a7b-9c3e-4f6a8b0d2e3"+string(rune('0'+i)))
			sim.IgnoreShutdown(vm.VMID, tc.guestIgnores)
			before := sim.Requests()
			spec.CPUs, spec.MemoryMiB = 4, 4096
			spec.PowerOffMode, spec.PowerOffGrace = tc.mode, 300*time.Millisecond
			var asked []time.Time
			spec.RecordSoftPowerOff = func(_ context.Context, at time.Time) error { asked = append(asked, at); return nil }
			// Calls as the reconciler makes them while the VM restarts,
			// each with the request time the status recorded.
			var st providers.MachineStatus
			var err error
			restarted, calls := false, 0
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if len(asked) > 0 {
					spec.SoftPowerOffTime = asked[len(asked)-1]
				}
				if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
					t.Fatal(err)
				}
				calls++
				if st.Restarting {
					restarted = true
					if st.PowerState != infrav1.PowerStatePoweredOn || st.CPUs != 2 {
						t.Errorf("call %d: restarting %s with %d CPUs, want PoweredOn with its old 2", calls, st.PowerState, st.CPUs)
					}
					continue
				}
				break
			}
			after := sim.Requests()
			shutdowns, stops := after["POST qemu shutdown"]-before["POST qemu shutdown"], after["POST qemu stop"]-before["POST qemu stop"]
			if shutdowns != tc.shutdowns || stops != tc.stop || len(asked) != tc.shutdowns || restarted != tc.restarting {
				t.Errorf("%d shutdown and %d stop requests, %d recorded, restarting reported %t; want %d, %d, %t", shutdowns, stops, len(asked), restarted, tc.shutdowns, tc.stop, tc.restarting)
			}
			vm2 := namedVMs(sim, spec.Name)[0]
			if st.Restarting || st.PowerState != infrav1.PowerStatePoweredOn || st.CPUs != 4 || st.MemoryMiB != 4096 || vm2.Boots != vm.Boots+1 {
				t.Errorf("after %d calls: %+v, boots %d (was %d); want PoweredOn with 4 CPUs and 4096 MiB, booted once more", calls, st, vm2.Boots, vm.Boots)
			}
		})
	}
}
